---------------------------- MODULE FencingRule ----------------------------
(***************************************************************************)
(* The acceptance rule of a fencing resource, shared by FencedLock (the    *)
(* model) and TraceFencedLock (trace validation of recorded histories).    *)
(*                                                                         *)
(* A resource remembers the highest token it accepted (maxTok) and the     *)
(* client that used it (maxOwner).  With fencing and the owner tie-break   *)
(* it accepts an operation carrying token t from client c iff              *)
(*     t > maxTok  \/  (t = maxTok /\ c = maxOwner).                       *)
(* Without the tie-break it accepts iff t >= maxTok; without fencing it    *)
(* accepts everything.  Tokens start at 1; maxTok is 0 before any write.   *)
(***************************************************************************)
EXTENDS Naturals

Accepts(fencing, tieBreak, t, c, maxTok, maxOwner) ==
    IF ~fencing THEN TRUE
    ELSE IF tieBreak THEN t > maxTok \/ (t = maxTok /\ c = maxOwner)
    ELSE t >= maxTok
=============================================================================
