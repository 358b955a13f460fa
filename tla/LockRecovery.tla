----------------------------- MODULE LockRecovery -----------------------------
(***************************************************************************)
(* The lock's recovery paths (lock/scripts.go, lock/client.go,            *)
(* lock/lease.go), on one master: what happens after a reply is lost.     *)
(*                                                                         *)
(* LockQueue.tla models the holds, the queue and time; it knows a lost    *)
(* reply only as "the script ran and its reply vanished", and a client    *)
(* only as one token with one call at a time.  This module models what    *)
(* the TLA+ review of round three (shared notes, tla-review.md) found     *)
(* missing, and the late release of that round's review (defect 1):      *)
(*  - calls, not clients: every call has its own id (the attempt id the   *)
(*    scripts keep in r and in gone), and two calls of one owner          *)
(*    (WithOwner: one token) run at once;                                 *)
(*  - the network: a request waits in a bag and is delivered at any time, *)
(*    also after its sender gave up (a request held in transit past its   *)
(*    sender's deadline, the late-delivery fault); a reply is delivered   *)
(*    or lost;                                                             *)
(*  - the hash's hold ids (r, as a set: the holdIDs cap is not modelled,  *)
(*    so an undo always finds its id while its hold stands);              *)
(*  - the cleanup of a call whose outcome is unknown (attempt.cleanup,    *)
(*    Lease.cleanupOf): bury the call's id (buryScript, resent until its  *)
(*    reply comes), then take back the hold it may have added (undoScript *)
(*    for an owner's call; for a fresh token's acquire, releaseScript     *)
(*    with no fence and no id), resent until its reply comes;             *)
(*  - the checks that refuse buried ids: an acquire whose id is buried    *)
(*    takes nothing, a release whose id is buried and not in r (its hold *)
(*    was taken back) frees nothing.                                      *)
(*                                                                         *)
(* Not here: time (no lease expires, so every violation is one of the     *)
(* recovery paths, not of a TTL), the queue and the hand-off (LockQueue), *)
(* the fence across a failover (FencedLock), renewals (a renewal adds no  *)
(* hold: once buried it extends nothing, which needs time to matter),    *)
(* and a cleanup that gives up after cleanupPatience.                     *)
(*                                                                         *)
(* A call's life (pc):                                                     *)
(*   idle -> acq (request sent) -> held (reply: granted) | done (refused) *)
(*   acq -> bury (gave up: outcome unknown) -> undo -> done               *)
(*   held -> rel (release sent) -> done (reply) | bury -> undo -> done    *)
(* A call believes it holds the lock only in held.                        *)
(*                                                                         *)
(* Bug selects the earlier code's behaviour, for the must-fail configs:   *)
(*   "none"         the scripts and the cleanup as shipped                *)
(*   "laterelease"  releaseScript does not look its id up in gone: a     *)
(*                  release that lands after its own undo ends another   *)
(*                  hold of the owner (round three, defect 1)            *)
(*   "lateacquire"  acquireScript does not look its id up in gone: an     *)
(*                  acquire that lands after its cleanup adds a hold      *)
(*                  nobody takes back                                     *)
(*   "undofirst"    the cleanup takes the hold back before it buries the  *)
(*                  id (the order before the gone set existed)            *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, TLC

CONSTANTS
    Owner,       \* the WithOwner token that several calls share
    Fresh,       \* a fresh token: the one call of another client
    OwnerCalls,  \* the owner's calls (ids)
    FreshCalls,  \* the fresh token's calls (ids); one is enough
    MaxGrants,   \* bound on the fences issued (the counter)
    Bug          \* see above

Bugs == {"none", "laterelease", "lateacquire", "undofirst"}
None == "none"
Calls == OwnerCalls \cup FreshCalls

ASSUME OwnerCalls \cap FreshCalls = {} /\ Owner # Fresh
ASSUME MaxGrants \in Nat \ {0}
ASSUME Bug \in Bugs

Tok(x) == IF x \in OwnerCalls THEN Owner ELSE Fresh

VARIABLES
    holder,  \* the lock hash's o (None: no hash)
    n,       \* its n, the hold count
    r,       \* its r, the ids of the calls whose holds stand
    fence,   \* its f (and the fence counter: no failover here)
    gone,    \* the buried ids (the gone hash)
    net,     \* the requests in transit, delivered in any order, at any time
    pc,      \* per call, see above
    lf       \* per call: the fence its lease got (0: none)

vars == <<holder, n, r, fence, gone, net, pc, lf>>

\* The requests: an acquire (reentrant for the owner), a release with its
\* fence, an undo, a bury, and the cleanup's release of a fresh token
\* (releaseBestEffort: no fence, no id).
Msgs == [t : {"acq", "undo", "bury", "relany"}, id : Calls]
        \cup [t : {"rel"}, id : Calls, f : 1..MaxGrants]

TypeOK ==
    /\ holder \in {Owner, Fresh, None}
    /\ n \in 0..Cardinality(Calls) /\ r \subseteq Calls /\ gone \subseteq Calls
    /\ fence \in 0..MaxGrants
    /\ net \subseteq Msgs
    /\ pc \in [Calls -> {"idle", "acq", "held", "rel", "bury", "undo", "done"}]
    /\ lf \in [Calls -> 0..MaxGrants]

Init ==
    /\ holder = None /\ n = 0 /\ r = {} /\ fence = 0 /\ gone = {}
    /\ net = {}
    /\ pc = [x \in Calls |-> "idle"] /\ lf = [x \in Calls |-> 0]

-----------------------------------------------------------------------------
(* The scripts.  Each delivery runs one script atomically; ok says what   *)
(* its reply tells the sender (TRUE: granted / done).                     *)

Free == holder' = None /\ n' = 0 /\ r' = {}

\* dropHold and the count down of one hold, or the lock freed at the last.
EndHold(x) ==
    IF n > 1 THEN holder' = holder /\ n' = n - 1 /\ r' = r \ {x}
    ELSE Free

\* acquireScript, one-shot (mode "t"), reentrant for the owner.
AcquireScript(x, ok) ==
    IF Bug # "lateacquire" /\ x \in gone
    THEN ~ok /\ UNCHANGED <<holder, n, r, fence>>
    ELSE IF holder = None
    THEN /\ fence < MaxGrants /\ ok
         /\ holder' = Tok(x) /\ n' = 1 /\ r' = {x} /\ fence' = fence + 1
    ELSE IF holder = Tok(x)
    THEN /\ ok /\ holder' = holder /\ n' = n + 1 /\ r' = r \cup {x}
         /\ UNCHANGED fence
    ELSE ~ok /\ UNCHANGED <<holder, n, r, fence>>

\* releaseScript of call x's lease (fence f).
ReleaseScript(x, f, ok) ==
    IF holder # Tok(x) \/ fence # f
    THEN ~ok /\ UNCHANGED <<holder, n, r, fence>>
    ELSE IF Bug # "laterelease" /\ x \notin r /\ x \in gone
    THEN ~ok /\ UNCHANGED <<holder, n, r, fence>>
    ELSE ok /\ EndHold(x) /\ UNCHANGED fence

\* undoScript: the hold x added, if it stands.
UndoScript(x, ok) ==
    IF holder # Tok(x) \/ x \notin r
    THEN ok /\ UNCHANGED <<holder, n, r, fence>>
    ELSE ok /\ EndHold(x) /\ UNCHANGED fence

\* releaseBestEffort (the cleanup of a fresh token's acquire): whatever
\* the token holds.
ReleaseAnyScript(x, ok) ==
    IF holder # Tok(x)
    THEN ok /\ UNCHANGED <<holder, n, r, fence>>
    ELSE ok /\ EndHold(x) /\ UNCHANGED fence

Script(m, ok) ==
    CASE m.t = "acq"    -> AcquireScript(m.id, ok) /\ UNCHANGED gone
      [] m.t = "rel"    -> ReleaseScript(m.id, m.f, ok) /\ UNCHANGED gone
      [] m.t = "undo"   -> UndoScript(m.id, ok) /\ UNCHANGED gone
      [] m.t = "relany" -> ReleaseAnyScript(m.id, ok) /\ UNCHANGED gone
      [] m.t = "bury"   -> ok /\ gone' = gone \cup {m.id}
                           /\ UNCHANGED <<holder, n, r, fence>>

-----------------------------------------------------------------------------
(* The calls.                                                              *)

\* The step that takes a call's hold back in its cleanup.
TakeBack(x) == IF x \in OwnerCalls THEN [t |-> "undo", id |-> x]
               ELSE [t |-> "relany", id |-> x]

\* The request call x waits on in pc (its reply moves it on).
Awaits(x) ==
    CASE pc[x] = "acq"  -> {[t |-> "acq", id |-> x]}
      [] pc[x] = "rel"  -> {[t |-> "rel", id |-> x, f |-> lf[x]]}
      [] pc[x] = "bury" -> IF Bug = "undofirst" THEN {TakeBack(x)}
                           ELSE {[t |-> "bury", id |-> x]}
      [] pc[x] = "undo" -> IF Bug = "undofirst" THEN {[t |-> "bury", id |-> x]}
                           ELSE {TakeBack(x)}
      [] OTHER          -> {}

\* The cleanup's second step, sent once the first one's reply came.
CleanupSecond(x) == IF Bug = "undofirst" THEN [t |-> "bury", id |-> x] ELSE TakeBack(x)

StartAcquire(x) ==
    /\ pc[x] = "idle"
    /\ pc' = [pc EXCEPT ![x] = "acq"]
    /\ net' = net \cup {[t |-> "acq", id |-> x]}
    /\ UNCHANGED <<holder, n, r, fence, gone, lf>>

StartRelease(x) ==
    /\ pc[x] = "held"
    /\ pc' = [pc EXCEPT ![x] = "rel"]
    /\ net' = net \cup {[t |-> "rel", id |-> x, f |-> lf[x]]}
    /\ UNCHANGED <<holder, n, r, fence, gone, lf>>

\* The call's ctx ends before its reply came (the reply was lost, or the
\* request is still in transit): its outcome is unknown and its cleanup
\* starts, in the order it buries first.  The request stays in the net.
GiveUp(x) ==
    /\ pc[x] \in {"acq", "rel"}
    /\ pc' = [pc EXCEPT ![x] = "bury"]
    /\ net' = net \cup {IF Bug = "undofirst" THEN TakeBack(x) ELSE [t |-> "bury", id |-> x]}
    /\ UNCHANGED <<holder, n, r, fence, gone, lf>>

\* A cleanup step whose reply did not come is sent again.
Resend(x) ==
    /\ pc[x] \in {"bury", "undo"}
    /\ \E m \in Awaits(x) : m \notin net /\ net' = net \cup {m}
    /\ UNCHANGED <<holder, n, r, fence, gone, pc, lf>>

\* The sender of m hears its reply (ok): the call moves on.
Hear(m, ok) ==
    LET x == m.id IN
    CASE pc[x] = "acq" ->
           /\ pc' = [pc EXCEPT ![x] = IF ok THEN "held" ELSE "done"]
           /\ lf' = [lf EXCEPT ![x] = IF ok THEN fence' ELSE 0]
           /\ net' = net \ {m}
      [] pc[x] = "bury" ->
           /\ pc' = [pc EXCEPT ![x] = "undo"]
           /\ net' = (net \ {m}) \cup {CleanupSecond(x)}
           /\ UNCHANGED lf
      [] pc[x] \in {"rel", "undo"} ->
           pc' = [pc EXCEPT ![x] = "done"] /\ net' = net \ {m} /\ UNCHANGED lf

\* Redis runs request m; its reply reaches the sender, if it still waits
\* on it, or is lost.
Deliver(m) ==
    /\ m \in net
    /\ \E ok \in BOOLEAN, heard \in BOOLEAN :
         /\ Script(m, ok)
         /\ IF heard /\ m \in Awaits(m.id)
            THEN Hear(m, ok)
            ELSE net' = net \ {m} /\ UNCHANGED <<pc, lf>>

Next ==
    \/ \E x \in Calls : StartAcquire(x) \/ StartRelease(x) \/ GiveUp(x) \/ Resend(x)
    \/ \E m \in net : Deliver(m)

Spec == Init /\ [][Next]_vars

Perms == Permutations(OwnerCalls)

-----------------------------------------------------------------------------
(* What the lock promises.                                                 *)

\* The calls that believe they hold the lock, by token.
Believers(t) == {x \in Calls : pc[x] = "held" /\ Tok(x) = t}

\* Mutual exclusion over beliefs: a call that believes it holds the lock
\* holds it, under its own fence, and the hash counts at least as many
\* holds as its owner's calls believe they have, so no release of one of
\* them (late or not) frees the lock under another.  The review's check:
\* LockQueue's HoldsValid is per client and never compares the counts.
HoldsBelieved ==
    /\ \A x \in Calls : pc[x] = "held" => holder = Tok(x) /\ fence = lf[x]
    /\ holder # None => Cardinality(Believers(holder)) <= n

\* No two tokens' calls believe they hold the lock at once.
MutualExclusion ==
    \A x, y \in Calls : pc[x] = "held" /\ pc[y] = "held" => Tok(x) = Tok(y)

\* No orphan hold: once nothing is in transit and no cleanup runs, every
\* hold the hash counts belongs to a call that believes it holds it (a
\* hold without one stays until its TTL, or for good while its owner
\* comes back).  The review's "a lost WithRetry attempt left in the
\* network" breaks it.
Quiet == net = {} /\ \A x \in Calls : pc[x] \in {"idle", "held", "done"}
NoOrphanHold ==
    Quiet => IF holder = None THEN n = 0
             ELSE n = Cardinality(Believers(holder)) /\ r = Believers(holder)

\* The cleanup sees all its call did: an id in r is a call that believes it
\* holds, or one whose cleanup is not done yet.
IdsAccounted ==
    \A x \in r : pc[x] \in {"held", "rel", "bury", "undo", "acq"}
=============================================================================
