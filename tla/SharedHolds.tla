----------------------------- MODULE SharedHolds -----------------------------
(***************************************************************************)
(* The read-write lock and the semaphore (lock/shared_scripts.go) on one  *)
(* master, in the style of LockHolds.tla: one model where the holds, the  *)
(* line and every request a call sends, its cleanup's included, meet, on  *)
(* a network that delivers a request at any time, in any order, also     *)
(* after its sender gave up, and where a reply is heard or lost.          *)
(*                                                                         *)
(* Every hold is a record of its own (rec), named by its call; its mode   *)
(* (Mode: "r" read, "w" write, "p" permits) and permits (K) are its       *)
(* call's.  A call is admitted (Admit) beside the live records and the    *)
(* places ahead of it in the line: a write when nothing stands and nobody *)
(* is ahead; a read when no write stands and no writer is ahead; K[x]     *)
(* permits when those out, those asked for ahead and K[x] fit in Cap.  An *)
(* owner that holds enters at once (reentry: write to write, write to     *)
(* read, read to read; read to write is refused).  A request of a call    *)
(* whose cleanup buried it takes nothing; an end names its record.  A     *)
(* record expires on its own (Expire) once its call no longer believes it *)
(* holds (the clock assumption: a record outlives its lease's validity).  *)
(*                                                                         *)
(* Design selects the scripts:                                             *)
(*   "new"       as shipped                                               *)
(*   "unlockdel" a read's end deletes every record (Redisson's read       *)
(*               unlock that deleted the lock: rw-unlock-deletes)         *)
(*   "short"     one TTL for the whole lock, set by the latest grant: when *)
(*               that grant's call stops believing, every record goes     *)
(*               (a shorter nested hold ends the lock: rw-short-reentry)  *)
(*   "noexp"     records never expire (sem-no-expiry)                      *)
(*   "getset"    a permit acquire reads the count in one request and      *)
(*               writes it in a second (sem-getset)                        *)
(*   "readfirst" a reader is admitted whatever waits ahead of it (a       *)
(*               reader-preference lock: writers starve)                  *)
(* Ops: "lose" (replies lost: the call gives up, its cleanup buries and   *)
(* ends, resent until answered), "dup" (an end sent again: Release after  *)
(* an unknown outcome), "crash" (a holder dies and never releases),       *)
(* "expire" (records expire).                                              *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Design,   \* see above
    Ops,      \* the behaviours enabled
    Scenario, \* the calls (below)
    Waiters,  \* the calls that wait in line; the rest try once
    MaxDup    \* bound on the copies of one request in transit

(* The scenarios: each call makes one acquire; its name says its mode    *)
(* and its owner ("ra": a read of owner a; "wb2": owner b's second        *)
(* write, nested in its first).                                           *)
(*   "rw"     two readers of their own and a writer: sharing, exclusion,  *)
(*            a reader behind a waiting writer                             *)
(*   "nested" a writer, its nested write, and a reader                    *)
(*   "upgrade"   owner a's read, then its write (refused while it       *)
(*            reads), and another reader                                   *)
(*   "downgrade" owner a's write, then its read, and another reader     *)
(*   "sem"    2, 1 and 1 permits of 3, each its own owner                 *)
Calls == CASE Scenario = "rw"        -> {"ra", "rb", "wc"}
           [] Scenario = "nested"    -> {"wb", "wb2", "ra"}
           [] Scenario = "upgrade"   -> {"ra", "wa2", "rb"}
           [] Scenario = "downgrade" -> {"wa", "ra2", "rb"}
           [] Scenario = "sem"       -> {"pa", "pb", "pc"}
Mode == CASE Scenario = "rw"        -> ("ra" :> "r" @@ "rb" :> "r" @@ "wc" :> "w")
          [] Scenario = "nested"    -> ("wb" :> "w" @@ "wb2" :> "w" @@ "ra" :> "r")
          [] Scenario = "upgrade"   -> ("ra" :> "r" @@ "wa2" :> "w" @@ "rb" :> "r")
          [] Scenario = "downgrade" -> ("wa" :> "w" @@ "ra2" :> "r" @@ "rb" :> "r")
          [] Scenario = "sem"       -> ("pa" :> "p" @@ "pb" :> "p" @@ "pc" :> "p")
K == CASE Scenario = "sem" -> ("pa" :> 2 @@ "pb" :> 1 @@ "pc" :> 1)
       [] OTHER            -> [x \in Calls |-> 1]
Owner == CASE Scenario = "nested"    -> ("wb" :> "b" @@ "wb2" :> "b" @@ "ra" :> "a")
           [] Scenario = "upgrade"   -> ("ra" :> "a" @@ "wa2" :> "a" @@ "rb" :> "b")
           [] Scenario = "downgrade" -> ("wa" :> "a" @@ "ra2" :> "a" @@ "rb" :> "b")
           [] OTHER                  -> [x \in Calls |-> x]
Cap == 3

ASSUME Design \in {"new", "unlockdel", "short", "noexp", "getset", "readfirst"}
ASSUME Ops \subseteq {"lose", "dup", "crash", "expire"}
ASSUME Scenario \in {"rw", "nested", "upgrade", "downgrade", "sem"}
ASSUME Waiters \subseteq Calls /\ MaxDup \in Nat \ {0}

VARIABLES
    rec,      \* the live records (by call)
    line,     \* the places in line, in arrival order
    gone,     \* the buried calls
    net,      \* the requests in transit: <<request, copy>>
    pc,       \* per call: idle, acq, queued, set, held, rel, cu, done, dead
    rd,       \* getset: per call, the count its first request read
    last,     \* short: the call of the latest grant
    overtaken \* a reader was admitted with a writer ahead of it in line

vars == <<rec, line, gone, net, pc, rd, last, overtaken>>

Range(s) == {s[i] : i \in 1..Len(s)}
Without(s, e) == SelectSeq(s, LAMBDA v : v # e)
Join(l, x) == IF x \in Range(l) THEN l ELSE Append(l, x)
RECURSIVE SumK(_)
SumK(S) == IF S = {} THEN 0 ELSE LET x == CHOOSE y \in S : TRUE IN K[x] + SumK(S \ {x})
\* The places ahead of x: those before it, or the whole line for a call
\* not in it (a try, or a first attempt).
Ahead(x) == IF x \in Range(line)
            THEN {line[i] : i \in 1..(CHOOSE j \in 1..Len(line) : line[j] = x) - 1}
            ELSE Range(line)

Req(t, x) == [t |-> t, x |-> x]
Copies(m) == {c \in 1..MaxDup : <<m, c>> \in net}
Send(nt, m) == IF \E c \in 1..MaxDup : <<m, c>> \notin nt
               THEN nt \cup {<<m, CHOOSE c \in 1..MaxDup : <<m, c>> \notin nt>>}
               ELSE nt

\* Whether x may be admitted now (not a reentry).
Admit(x) ==
    CASE Mode[x] = "w" -> rec = {} /\ Ahead(x) = {}
      [] Mode[x] = "r" -> (\A y \in rec : Mode[y] # "w")
                          /\ (Design = "readfirst" \/ \A y \in Ahead(x) : Mode[y] # "w")
      [] OTHER         -> SumK(rec) + SumK(Ahead(x)) + K[x] <= Cap

Grant(x) ==
    /\ rec' = rec \cup {x} /\ line' = Without(line, x) /\ last' = x
    /\ overtaken' = (overtaken \/ (Mode[x] = "r" /\ \E y \in Ahead(x) : Mode[y] = "w"))

\* acquire of x; res is the reply ("ok", "q", "no", "up").
Acquire(x, res) ==
    IF x \in gone THEN res = "no" /\ UNCHANGED <<rec, line, last, overtaken>>
    ELSE IF x \in rec
    THEN res = "ok" /\ line' = Without(line, x) /\ UNCHANGED <<rec, last, overtaken>>
    ELSE IF Mode[x] # "p" /\ \E y \in rec : Owner[y] = Owner[x]
    THEN IF Mode[x] = "w" /\ ~\E y \in rec : Owner[y] = Owner[x] /\ Mode[y] = "w"
         THEN res = "up" /\ line' = Without(line, x) /\ UNCHANGED <<rec, last, overtaken>>
         ELSE res = "ok" /\ rec' = rec \cup {x} /\ line' = Without(line, x) /\ last' = x
              /\ UNCHANGED overtaken
    ELSE IF Admit(x)
    THEN res = "ok" /\ Grant(x)
    ELSE IF x \in Waiters
    THEN res = "q" /\ line' = Join(line, x) /\ UNCHANGED <<rec, last, overtaken>>
    ELSE res = "no" /\ UNCHANGED <<rec, line, last, overtaken>>

\* end of x's hold (bury: the cleanup's, which also leaves the place).
End(x, bury, res) ==
    /\ gone' = IF bury THEN gone \cup {x} ELSE gone
    /\ line' = IF bury THEN Without(line, x) ELSE line
    /\ IF x \in rec
       THEN res = "ok" /\ rec' = IF Design = "unlockdel" /\ Mode[x] = "r" THEN {} ELSE rec \ {x}
       ELSE res = "no" /\ UNCHANGED rec

\* getset: the second request writes the count the first read.
SetCount(x, res) ==
    IF x \notin gone /\ rd[x] + K[x] <= Cap
    THEN res = "ok" /\ rec' = rec \cup {x} /\ last' = x /\ UNCHANGED <<line, overtaken>>
    ELSE res = "no" /\ UNCHANGED <<rec, line, last, overtaken>>

Init ==
    /\ rec = {} /\ line = <<>> /\ gone = {} /\ net = {}
    /\ pc = [x \in Calls |-> "idle"] /\ rd = [x \in Calls |-> 0]
    /\ last = (CHOOSE x \in Calls : TRUE) /\ overtaken = FALSE

Start(x) ==
    /\ pc[x] = "idle"
    /\ pc' = [pc EXCEPT ![x] = "acq"] /\ net' = Send(net, Req("acq", x))
    /\ UNCHANGED <<rec, line, gone, rd, last, overtaken>>

AskAgain(x) ==
    /\ pc[x] = "queued"
    /\ pc' = [pc EXCEPT ![x] = "acq"] /\ net' = Send(net, Req("acq", x))
    /\ UNCHANGED <<rec, line, gone, rd, last, overtaken>>

Release(x) ==
    /\ pc[x] = "held"
    /\ pc' = [pc EXCEPT ![x] = "rel"] /\ net' = Send(net, Req("end", x))
    /\ UNCHANGED <<rec, line, gone, rd, last, overtaken>>

\* A call's ctx ends before its reply (lost, or still in transit): its
\* cleanup buries it, ends its hold and leaves its place (one request,
\* resent until answered); a waiter that gives up does the same.
GiveUp(x) ==
    /\ ("lose" \in Ops /\ pc[x] \in {"acq", "set", "rel"}) \/ pc[x] = "queued"
    /\ pc' = [pc EXCEPT ![x] = "cu"] /\ net' = Send(net, Req("endbp", x))
    /\ UNCHANGED <<rec, line, gone, rd, last, overtaken>>

Resend(x) ==
    /\ "lose" \in Ops /\ pc[x] = "cu"
    /\ Cardinality(Copies(Req("endbp", x))) < MaxDup
    /\ net' = Send(net, Req("endbp", x))
    /\ UNCHANGED <<rec, line, gone, pc, rd, last, overtaken>>

\* Release sent again (after an unknown outcome): its end lands twice.
Again(x) ==
    /\ "dup" \in Ops /\ pc[x] \in {"cu", "done"}
    /\ Cardinality(Copies(Req("end", x))) < MaxDup
    /\ net' = Send(net, Req("end", x))
    /\ UNCHANGED <<rec, line, gone, pc, rd, last, overtaken>>

Crash(x) ==
    /\ "crash" \in Ops /\ pc[x] = "held"
    /\ pc' = [pc EXCEPT ![x] = "dead"]
    /\ UNCHANGED <<rec, line, gone, net, rd, last, overtaken>>

\* A record expires once its call no longer believes it (its lease's
\* validity ended before the record's TTL); "short": no record of its own,
\* but the whole lock, once the latest grant's call no longer believes it
\* (ExpireLock).
Gone(x) == pc[x] \in {"rel", "cu", "done", "dead"}
Expire(x) ==
    /\ "expire" \in Ops /\ Design \notin {"noexp", "short"} /\ x \in rec /\ Gone(x)
    /\ rec' = rec \ {x}
    /\ UNCHANGED <<line, gone, net, pc, rd, last, overtaken>>
ExpireLock ==
    /\ "expire" \in Ops /\ Design = "short" /\ last \in rec /\ Gone(last)
    /\ rec' = {}
    /\ UNCHANGED <<line, gone, net, pc, rd, last, overtaken>>

\* A permit acquire of the getset design: two requests.
GetSet(x) == Design = "getset" /\ Mode[x] = "p"

\* Redis runs a request in transit (the copy leaves the net); its sender
\* hears the reply, or not.
Deliver ==
    \E e \in net : LET m == e[1] IN LET x == m.x IN
    \E res \in {"ok", "q", "no", "up"}, heard \in BOOLEAN :
      /\ (~heard => "lose" \in Ops)
      /\ CASE m.t = "acq" /\ GetSet(x) ->
                 \* the first request: GET the count
                 /\ res = "ok" /\ rd' = [rd EXCEPT ![x] = SumK(rec)]
                 /\ UNCHANGED <<rec, line, gone, last, overtaken>>
           [] m.t = "acq" /\ ~GetSet(x) -> Acquire(x, res) /\ UNCHANGED <<gone, rd>>
           [] m.t = "set" -> SetCount(x, res) /\ UNCHANGED <<gone, rd>>
           [] m.t = "end" -> End(x, FALSE, res) /\ UNCHANGED <<rd, last, overtaken>>
           [] m.t = "endbp" -> End(x, TRUE, res) /\ UNCHANGED <<rd, last, overtaken>>
      /\ LET nt == net \ {e} IN
         IF ~heard THEN net' = nt /\ UNCHANGED pc
         ELSE CASE pc[x] = "acq" /\ m.t = "acq" /\ GetSet(x) ->
                     pc' = [pc EXCEPT ![x] = "set"] /\ net' = Send(nt, Req("set", x))
                [] pc[x] \in {"acq", "set"} /\ m.t = pc[x] /\ ~(m.t = "acq" /\ GetSet(x)) ->
                     /\ pc' = [pc EXCEPT ![x] = CASE res = "ok" -> "held"
                                                  [] res = "q"  -> "queued"
                                                  [] OTHER      -> "done"]
                     /\ net' = nt
                [] pc[x] = "rel" /\ m.t = "end" -> pc' = [pc EXCEPT ![x] = "done"] /\ net' = nt
                [] pc[x] = "cu" /\ m.t = "endbp" -> pc' = [pc EXCEPT ![x] = "done"] /\ net' = nt
                [] OTHER -> net' = nt /\ UNCHANGED pc

Next ==
    \/ Deliver
    \/ \E x \in Calls : Start(x) \/ AskAgain(x) \/ Release(x) \/ GiveUp(x) \/ Resend(x)
                        \/ Again(x) \/ Crash(x) \/ Expire(x)
    \/ ExpireLock

Spec == Init /\ [][Next]_vars /\ \A x \in Calls : WF_vars(Expire(x))

-----------------------------------------------------------------------------
(* What the lock promises.                                                 *)

Believes(x) == pc[x] = "held"

TypeOK ==
    /\ rec \subseteq Calls /\ gone \subseteq Calls
    /\ pc \in [Calls -> {"idle", "acq", "queued", "set", "held", "rel", "cu", "done", "dead"}]

\* rw-exclusion: no write hold is believed beside another owner's hold.
RWExclusion ==
    \A x, y \in Calls :
        (x # y /\ Believes(x) /\ Believes(y) /\ Owner[x] # Owner[y] /\ Mode[x] # "p" /\ Mode[y] # "p")
            => Mode[x] = "r" /\ Mode[y] = "r"

\* permits: at no instant more than Cap believed permits.
Permits == SumK({x \in Calls : Believes(x) /\ Mode[x] = "p"}) <= Cap

\* Every believed hold has its record.
HoldsBelieved == \A x \in Calls : Believes(x) => x \in rec

\* A writer is not starved: no reader is admitted past a writer waiting
\* ahead of it.
WriterNotStarved == ~overtaken

\* Once nothing is in transit and no call is on its way, every record is
\* a hold its call believes, or a dead holder's (which expires): a request
\* of a call that gave up takes nothing when it lands late.
Quiet == net = {} /\ \A x \in Calls : pc[x] \notin {"acq", "set", "rel", "cu"}
NoOrphanHold == Quiet => \A x \in rec : pc[x] \in {"held", "dead"}

\* A dead holder's record goes (its permits come back).
OrphansGo == \A x \in Calls : (pc[x] = "dead") ~> (x \notin rec)
=============================================================================
