--------------------------- MODULE TraceFencedLock ---------------------------
(***************************************************************************)
(* Trace validation: does a recorded history of the fenced lock (turned   *)
(* into TraceData.tla by `lockproof trace`) follow the rules of           *)
(* FencedLock?                                                             *)
(*                                                                         *)
(* The pattern of TLA+ trace validation: the spec takes the trace's       *)
(* events one by one, each only if the rules allow it (nondeterministically*)
(* where an `unknown` result or a failover leaves the effect open), and    *)
(* accepts when every event is taken.  TLC checks the invariant           *)
(* TraceNotAccepted; a violation of it is the accepting run.              *)
(*                                                                         *)
(* Orders.  The events of a key come in call order, but the spec takes    *)
(* them in every order that respects real time: a pending event may be   *)
(* passed by a later one unless it returned before that one was called   *)
(* (and within the window Trace[i].upto the converter gives).  So a       *)
(* history is accepted iff some linearization of it follows the rules.   *)
(* Keys are independent objects (linearizability is local): their events  *)
(* are taken key after key.  When no order takes every event, TLC         *)
(* finishes without error; the spec prints, as <<"pending", l>>, each new *)
(* highest l reached: Trace[l] is the first event no order could take     *)
(* (tla/run.sh prints its history line).                                  *)
(*                                                                         *)
(* A history is observed from outside, with real time, not the ticks of   *)
(* FencedLock: each event carries its call and return ticks, and an        *)
(* acquire or renew the bounds of its lease (surely valid until lo,        *)
(* surely expired after hi, with the contract's clock drift).  The rules  *)
(* are FencedLock's server and resource rules, checked against those       *)
(* bounds:                                                                 *)
(*  - an ok acquire needs the key free or its lease possibly expired on   *)
(*    the master that served it, a fence above every fence that master   *)
(*    issued, and a fence no other client ever got; the owner of a live   *)
(*    lease acquiring again gets its own fence and one more hold           *)
(*    (reentrancy), and each ok release takes one hold off, the last one  *)
(*    freeing the key;                                                     *)
(*  - holds are kept by lease number (e.lease, 0 for none): a release or  *)
(*    renew of lease L acts on hold L of its client and no other, an ok   *)
(*    one needs it (a number already released is refused), and an        *)
(*    unknown release may end hold L only, whenever it lands; ops without *)
(*    numbers are read by count;                                          *)
(*  - an ok release or renew needs the owner and token of the lease and   *)
(*    the lease not surely expired; a failed one had no effect and is     *)
(*    not judged (docs/DESIGN.md: fail ops are not in the models): a lock *)
(*    may refuse a renewal or release of one hold while its owner's other *)
(*    hold keeps the key (a released nested hold's watchdog);             *)
(*  - an accepted resource op needs FencingRule to accept its (token,     *)
(*    client); a read returns the value of the last accepted write, and a *)
(*    write with prev finds prev there (no lost update); a rejected op    *)
(*    had no effect and is not judged, like a failed lock op;             *)
(*  - an inspect or holds op (what the lock said of the key's holders)  *)
(*    reads the lease at an instant of its window: "free" needs the key   *)
(*    free or its lease possibly expired; "held by c" (with a fence, a    *)
(*    count) needs c's lease, not surely expired, with that fence (or one *)
(*    nobody learnt) and that many holds, or an acquire of c still       *)
(*    pending, to which the lock may have handed the key (a provisional   *)
(*    hand-off holds a fence its acquire never returns); a holds count of *)
(*    the asker's own holds needs its lease's count, or 0 when the lease *)
(*    may be gone or is another's; "held" naming nobody is not judged,    *)
(*    nor is an answer that was not ok;                                   *)
(*  - a fail acquire changes nothing; an unknown one may have taken      *)
(*    effect with a fence nobody learnt, which its owner's next acquire   *)
(*    may re-enter (one more hold, the fence it then learns), or may      *)
(*    have ended unseen, the next acquire a new lease; likewise an        *)
(*    unknown acquire by the owner of a live lease may re-enter it.       *)
(*                                                                         *)
(* Failover (split brain, as in FencedLock).  An op that overlaps a       *)
(* failover fault window (Trace[i].win) may be served by either of two    *)
(* masters: side 1, the one before the window, or side 2, the promoted    *)
(* replica, which starts the window with side 1's lease or without it     *)
(* (the replica had not received the grant) and with side 1's fences      *)
(* (the fence reads the clock: a promoted master's fences exceed the lost *)
(* ones).  Until side 2 serves its first op, it may still be replicating  *)
(* side 1 (Replicate: it takes side 1's state again, at any instant): the *)
(* fault slows the link before it cuts it, and the promotion comes later, *)
(* so the promoted replica holds side 1's state of some instant inside    *)
(* the window, not of its start.  Each side follows the rules on its own; *)
(* the first op of the key after the window finds one survivor's lease    *)
(* and fences above both.                                                 *)
(* Only ops that overlap a window get this latitude: the rest of the     *)
(* history is checked against one master.                                 *)
(*                                                                         *)
(* Skewed clocks (TraceData's Skewed: a failover-skew window).  The       *)
(* promoted replica's clock may be behind, so its fences may start below  *)
(* the lost ones (docs/DESIGN.md): side 2 starts with no fence to exceed, *)
(* and the survivor keeps its own fences.  Each master's fences still     *)
(* rise, no fence has two owners, and the resource still refuses ops      *)
(* below the highest fence it saw.                                        *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC, TraceData, FencingRule

VARIABLES
    l,       \* the first event not yet taken
    taken,   \* the events after l already taken
    lock,    \* per key, per side: the current lease [owner, tok, n, ph, hs, phs, lo, hi]
             \* (the holds its owner took with that fence: n without a
             \* lease number, ph of them by acquires of unknown outcome, and
             \* hs the numbers of the numbered ones, phs those of unknown
             \* outcome; tok 0: an acquire whose token nobody learnt took it)
    issued,  \* per key, per side: the highest fence that master issued
    owners,  \* per key: the <<fence, client>> of every ok acquire
    split,   \* per key: TRUE while its ops may go to two masters
    res,     \* per key: the resource [maxTok, owner, val]
    now,     \* per key: the instant (tick) of the last lease op taken
    follows  \* per key: TRUE while side 2 may still replicate side 1 (split,
             \* and side 2 has served no op yet)

vars == <<l, taken, lock, issued, owners, split, res, now, follows>>

KeyIds == 1..NumKeys
Sides == {1, 2}
NoLease == [owner |-> 0, tok |-> 0, n |-> 0, ph |-> 0, hs |-> {}, phs |-> {}, lo |-> 0, hi |-> 0]
Max2(a, b) == IF a >= b THEN a ELSE b

Init ==
    /\ l = 1 /\ taken = {}
    /\ lock = [k \in KeyIds |-> [s \in Sides |-> NoLease]]
    /\ issued = [k \in KeyIds |-> [s \in Sides |-> 0]]
    /\ owners = [k \in KeyIds |-> {}]
    /\ split = [k \in KeyIds |-> FALSE]
    /\ res = [k \in KeyIds |-> [maxTok |-> 0, owner |-> 0, val |-> 0]]
    /\ now = [k \in KeyIds |-> 0]
    /\ follows = [k \in KeyIds |-> FALSE]
    /\ TLCSet(1, 1)

\* Instants, as docs/DESIGN.md's models take them: a lease op takes effect
\* at the earliest instant its rules allow, at or after its call and the
\* key's last lease op, and at or before its return.
At(e) == Max2(now[e.k], e.call)
SetNow(e, t) == now' = [now EXCEPT ![e.k] = t]

\* Another client's lease (one that may still be valid blocks an acquire
\* until its lo has passed: lo is the last instant it is surely valid).
HeldByOther(ls, e) == ls.owner # 0 /\ ls.owner # e.c
SurelyExpired(ls, t) == t > ls.hi
\* e's client holds ls, and with e's token when both have one.
Owns(ls, e) == ls.owner = e.c /\ (ls.tok = e.tok \/ ls.tok = 0 \/ e.tok = 0)
\* A nested hold: the holder again, with its token (or neither has one).
SameHold(ls, e) == ls.owner = e.c /\ ls.tok = e.tok
\* 1 for an acquire of unknown outcome: the hold it adds is a phantom.
Ph(e) == IF e.res = "ok" THEN 0 ELSE 1

\* Holds (docs/DESIGN.md, "Contract: history file": lease numbers).  An op
\* with a lease number (e.lease > 0) is about that hold of its client: an
\* acquire starts hold e.lease, and a release or renew acts on it and on no
\* other (the lock keeps one record per hold, and a release ends exactly
\* its own).  An op without one is read by count, as before lease numbers:
\* an acquire adds a hold, a release takes one off.
Count(ls) == ls.n + Cardinality(ls.hs)
\* A lease with no hold left frees the key.
Norm(ls) == IF Count(ls) = 0 THEN NoLease ELSE ls
\* ls with e's hold added (a phantom for an acquire of unknown outcome).
AddHold(ls, e) ==
    IF e.lease = 0 THEN [ls EXCEPT !.n = @ + 1, !.ph = @ + Ph(e)]
    ELSE [ls EXCEPT !.hs = @ \cup {e.lease}, !.phs = IF Ph(e) = 1 THEN @ \cup {e.lease} ELSE @]
\* e may add a hold to ls: a lease number names one hold of its client.
NewHold(ls, e) == e.lease = 0 \/ e.lease \notin ls.hs
\* e's client acts on a hold of ls that e may name: its own, if numbered.
HasHold(ls, e) == e.lease = 0 \/ e.lease \in ls.hs
LeaseOf(e) == AddHold([NoLease EXCEPT !.owner = e.c, !.tok = e.tok, !.lo = e.lo, !.hi = e.hi], e)
\* The leases a release e may leave of ls: without e's own hold, if it is
\* numbered; else one hold fewer by count, a known one while there is one
\* (the phantoms stay, up to the holds left), numbered or not.
Ended(ls, e) ==
    IF e.lease > 0
    THEN IF e.lease \in ls.hs THEN {Norm([ls EXCEPT !.hs = @ \ {e.lease}, !.phs = @ \ {e.lease}])} ELSE {}
    ELSE LET known == ls.n > ls.ph \/ ls.hs \ ls.phs # {} IN
         (IF ls.n > 0 /\ (ls.n > ls.ph \/ ~known)
          THEN {Norm([ls EXCEPT !.n = @ - 1, !.ph = IF @ < ls.n - 1 THEN @ ELSE ls.n - 1])} ELSE {})
         \cup {Norm([ls EXCEPT !.hs = @ \ {x}, !.phs = @ \ {x}]) : x \in {y \in ls.hs : y \notin ls.phs \/ ~known}}

\* The states of key k's two masters that event e may find: the window
\* opens (side 2 is the promoted replica, with or without the last lease),
\* closes (one side survives, with the fences of both), or goes on.
Pre(k, e) ==
    IF e.win /\ ~split[k]
    THEN {[lk |-> [lock[k] EXCEPT ![2] = x],
           iss |-> [issued[k] EXCEPT ![2] = IF Skewed THEN 0 ELSE issued[k][1]]]
            : x \in {lock[k][1], NoLease}}
    ELSE IF ~e.win /\ split[k]
    THEN {[lk |-> [s \in Sides |-> lock[k][w]],
           iss |-> [s \in Sides |-> IF Skewed THEN issued[k][w]
                                    ELSE Max2(issued[k][1], issued[k][2])]] : w \in Sides}
    ELSE {[lk |-> lock[k], iss |-> issued[k]]}

\* The sides that may have served e.
SidesOf(e) == IF e.win THEN Sides ELSE {1}

\* Side s served lease op e of key k: side 2 follows side 1 from the
\* window's first op until it serves one itself (then it is a master of
\* its own); outside a window there is no side 2.
Served(k, e, s) ==
    follows' = [follows EXCEPT ![k] = e.win /\ s = 1 /\ (follows[k] \/ ~split[k])]

\* Key k's lease on side s becomes ls; the fences stay.
SetLease(k, p, s, ls) ==
    /\ lock' = [lock EXCEPT ![k] = [p.lk EXCEPT ![s] = ls]]
    /\ issued' = [issued EXCEPT ![k] = p.iss]

\* e had no effect (failed, or an unknown outcome that did not happen).
NoEffect(k, p, s) == SetLease(k, p, s, p.lk[s]) /\ UNCHANGED now

-----------------------------------------------------------------------------
\* An acquire takes effect (ok, or unknown and happened).
AcquireTakes(e, k, p, s) ==
    LET ls == p.lk[s]
        t0 == At(e)
    IN
    IF SameHold(ls, e) /\ ~SurelyExpired(ls, t0)
    THEN \* the owner again (reentrancy): its own fence, one more hold, and
         \* the lease lives at least as long as both
         /\ t0 <= e.ret
         /\ NewHold(ls, e)
         /\ SetLease(k, p, s, [AddHold(ls, e) EXCEPT !.lo = Max2(@, e.lo), !.hi = Max2(@, e.hi)])
         /\ UNCHANGED owners
         /\ SetNow(e, t0)
    ELSE \/ \* the owner again, one of the two fences unknown (an acquire of
            \* unknown outcome): one more hold of a lease whose fence is the
            \* known one, new when the lease began
            /\ Owns(ls, e) /\ ~SurelyExpired(ls, t0)
            /\ t0 <= e.ret
            /\ NewHold(ls, e)
            /\ e.tok = 0 \/ e.tok > p.iss[s]
            /\ e.res = "ok" /\ e.tok > 0 => \A o \in owners[k] : o[1] = e.tok => o[2] = e.c
            /\ lock' = [lock EXCEPT ![k] = [p.lk EXCEPT ![s] =
                   [AddHold(ls, e) EXCEPT !.tok = Max2(@, e.tok),
                              !.lo = Max2(@, e.lo), !.hi = Max2(@, e.hi)]]]
            /\ issued' = [issued EXCEPT ![k] = [p.iss EXCEPT ![s] = IF e.tok > 0 THEN e.tok ELSE @]]
            /\ owners' = IF e.res = "ok" /\ e.tok > 0
                         THEN [owners EXCEPT ![k] = @ \cup {<<e.tok, e.c>>}] ELSE owners
            /\ SetNow(e, t0)
       \/ \* a new lease: after another client's lease may have expired, with
          \* a fence above every fence that master issued (a token nobody
          \* learnt is not checked) that no other client got
          LET t == IF HeldByOther(ls, e) THEN Max2(t0, ls.lo + 1) ELSE t0 IN
          /\ t <= e.ret
          /\ e.tok = 0 \/ e.tok > p.iss[s]
          /\ e.res = "ok" /\ e.tok > 0 => \A o \in owners[k] : o[1] = e.tok => o[2] = e.c
          /\ lock' = [lock EXCEPT ![k] = [p.lk EXCEPT ![s] = LeaseOf(e)]]
          /\ issued' = [issued EXCEPT ![k] = [p.iss EXCEPT ![s] = IF e.tok > 0 THEN e.tok ELSE @]]
          /\ owners' = IF e.res = "ok" /\ e.tok > 0
                       THEN [owners EXCEPT ![k] = @ \cup {<<e.tok, e.c>>}] ELSE owners
          /\ SetNow(e, t)

AcquireEv(e) ==
    /\ e.kind = "acquire"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         /\ Served(k, e, s)
         /\ CASE e.res = "ok" -> AcquireTakes(e, k, p, s)
              [] e.res = "fail" -> NoEffect(k, p, s) /\ UNCHANGED owners
              [] OTHER -> \/ NoEffect(k, p, s) /\ UNCHANGED owners
                          \/ AcquireTakes(e, k, p, s)
    /\ UNCHANGED res

\* A release or renew takes effect: its client holds the lease (and the
\* hold e names, if it names one), and at its instant the lease may still
\* be valid.
Holds(e, ls) == Owns(ls, e) /\ HasHold(ls, e) /\ At(e) <= e.ret /\ ~SurelyExpired(ls, At(e))

ReleaseEv(e) ==
    /\ e.kind = "release"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         LET ls == p.lk[s]
             \* one hold fewer (e's own, if it names one: an unknown
             \* release too, whenever it lands, ends no other hold); the
             \* last one frees the key
             takes == Holds(e, ls) /\ \E after \in Ended(ls, e) : SetLease(k, p, s, after) /\ SetNow(e, At(e))
         IN /\ Served(k, e, s)
            /\ CASE e.res = "ok" -> takes
                 [] e.res = "fail" -> NoEffect(k, p, s)
                 [] OTHER -> NoEffect(k, p, s) \/ takes
    /\ UNCHANGED <<owners, res>>

RenewEv(e) ==
    /\ e.kind = "renew"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         LET ls == p.lk[s]
             \* The lock's expiry only grows (luaExtend): a renew with a
             \* shorter TTL than another hold's does not shorten the lease.
             takes == /\ Holds(e, ls)
                      /\ SetLease(k, p, s, [ls EXCEPT !.lo = Max2(@, e.lo), !.hi = Max2(@, e.hi)])
                      /\ SetNow(e, At(e))
         IN /\ Served(k, e, s)
            /\ CASE e.res = "ok" -> takes
                 [] e.res = "fail" -> NoEffect(k, p, s)
                 [] OTHER -> NoEffect(k, p, s) \/ takes
    /\ UNCHANGED <<owners, res>>

\* The resource takes op e on key k: its token is not below the highest
\* it took (fencing-order). The equal-token tie-break of FencingRule is the
\* token-owner rule here: an accepted op must carry its own client's token
\* (e.foreign), as docs/DESIGN.md states it; an unknown op is not held to it.
Fenced(e) == Accepts(TRUE, FALSE, e.tok, e.c, res[e.k].maxTok, res[e.k].owner)
Raise(e, val) ==
    res' = [res EXCEPT ![e.k] = [maxTok |-> Max2(e.tok, res[e.k].maxTok), owner |-> e.c, val |-> val]]

WriteEv(e) ==
    /\ e.kind = "write"
    /\ LET apply == /\ Fenced(e)
                    /\ e.prev < 0 \/ e.prev = res[e.k].val
                    /\ Raise(e, e.val)
       IN CASE e.res = "ok" -> ~e.foreign /\ apply
            [] e.res = "rejected" -> UNCHANGED res
            [] OTHER -> UNCHANGED res \/ apply
    /\ UNCHANGED <<lock, issued, owners, now, follows>>

\* An unknown read observed nothing and changes nothing.
ReadEv(e) ==
    /\ e.kind = "read"
    /\ IF e.res = "ok"
       THEN ~e.foreign /\ Fenced(e) /\ e.val = res[e.k].val /\ Raise(e, res[e.k].val)
       ELSE UNCHANGED res
    /\ UNCHANGED <<lock, issued, owners, now, follows>>

\* An acquire of client c on e's key, not yet taken and called before e
\* returned, that may succeed: the lock may have handed the key to it (a
\* provisional hand-off, named as held by c with a fence the acquire may
\* never return) before it returned.
PendingAcquire(e, c) ==
    \E j \in l..Len(Trace) :
        /\ j \notin taken
        /\ Trace[j].kind = "acquire" /\ Trace[j].res # "fail"
        /\ Trace[j].k = e.k /\ Trace[j].c = c /\ Trace[j].call <= e.ret

\* The lock's answer e fits lease ls at some instant of e's window; the
\* instant taken is the earliest that fits.
\*  - free: nobody holds ls, or it may have expired (after its lo);
\*  - held by e.holder: its lease, not surely expired (on a promoted
\*    replica whose clock is behind, it may outlive that), with e's fence (or
\*    a fence nobody learnt) and e's count, or, whatever fence and count,
\*    a pending acquire of the holder while ls is free, its own, or may
\*    have expired;
\*  - holds (the asker's count): 0 when ls is another's or may have
\*    expired, else its count.
\*  - an unnamed holder is not judged (the lock may know of a hold the
\*    history does not name).
Answer(e, k, p, s) ==
    LET ls == p.lk[s]
        t0 == At(e)
        tFree == IF ls.owner = 0 THEN t0 ELSE Max2(t0, ls.lo + 1)
        \* taken at t0, or at tFree; the lease stays as it is
        At0 == t0 <= e.ret /\ SetLease(k, p, s, ls) /\ SetNow(e, t0)
        AtFree == tFree <= e.ret /\ SetLease(k, p, s, ls) /\ SetNow(e, tFree)
        \* a promoted replica whose clock is behind (Skewed) keeps the
        \* keys it got past their expiry on the old master's clock, for
        \* as long as its clock is behind (the trace does not say how
        \* long: so in a skewed trace, for good)
        Alive == ~SurelyExpired(ls, t0) \/ Skewed
        IsLease(c) == /\ ls.owner = c
                      /\ Alive
                      /\ (e.count < 0 \/ e.count = Count(ls))
        Fence == e.tok = 0 \/ ls.tok = 0 \/ ls.tok = e.tok
    IN
    CASE e.kind = "inspect" /\ ~e.held -> AtFree
      [] e.kind = "inspect" /\ e.holder = 0 -> At0
      [] e.kind = "inspect" ->
           \/ IsLease(e.holder) /\ Fence /\ At0
           \/ /\ PendingAcquire(e, e.holder)
              /\ IF ls.owner = e.holder THEN At0 ELSE AtFree
      [] OTHER -> \* holds: the asker's own count
           \/ e.count = 0 /\ IF ls.owner # e.c THEN At0 ELSE AtFree
           \/ e.count > 0 /\ IsLease(e.c) /\ At0

InspectEv(e) ==
    /\ e.kind \in {"inspect", "holds"}
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         /\ Served(k, e, s)
         /\ IF e.res = "ok" THEN Answer(e, k, p, s) ELSE NoEffect(k, p, s)
    /\ UNCHANGED <<owners, res>>

\* Fault windows are read through the events' win flags; the event itself
\* is a no-op.
FaultEv(e) ==
    /\ e.kind = "fault"
    /\ UNCHANGED <<lock, issued, owners, res, now, follows>>

-----------------------------------------------------------------------------
\* Real-time order (docs/DESIGN.md): a precedes b when a returned before b
\* was called, or at b's call if a took time (an op whose return equals its
\* call is concurrent with the ops called at that instant).
Precedes(a, b) == a.ret < b.call \/ (a.ret = b.call /\ a.ret > a.call)

\* The events that may be taken next: pending, within l's window, and not
\* after a pending event that precedes them.
Ready ==
    { i \in l..Trace[l].upto :
        /\ i \notin taken
        /\ \A j \in l..(i - 1) : j \in taken \/ ~Precedes(Trace[j], Trace[i]) }

\* The first pending event once the events in t are taken.
FirstPending(t) ==
    CHOOSE m \in l..(Len(Trace) + 1) : m \notin t /\ \A x \in l..(m - 1) : x \in t

Take(i) ==
    /\ LET e == Trace[i] IN
       /\ AcquireEv(e) \/ ReleaseEv(e) \/ RenewEv(e) \/ InspectEv(e) \/ WriteEv(e) \/ ReadEv(e) \/ FaultEv(e)
       \* the lock's ops open and close windows; the resource has no sides
       /\ split' = IF e.kind \in {"acquire", "release", "renew", "inspect", "holds"}
                   THEN [split EXCEPT ![e.k] = e.win] ELSE split
    /\ LET t == taken \cup {i} IN
         /\ l' = FirstPending(t)
         /\ taken' = {x \in t : x > l'}
    \* Report progress: the highest first-pending event reached so far.
    /\ IF l' > TLCGet(1) THEN TLCSet(1, l') /\ PrintT(<<"pending", l'>>) ELSE TRUE

\* A lock may take the hold of an acquire of unknown outcome back at any
\* instant, unrecorded (the shipped lock's cleanup of a lost acquire): one
\* phantom hold fewer, the last hold freeing the key. It never takes back
\* a hold a client knows of.
Vanish(k, s) ==
    LET ls == lock[k][s] IN
    /\ \/ ls.ph > 0 /\ lock' = [lock EXCEPT ![k][s] = Norm([ls EXCEPT !.n = @ - 1, !.ph = @ - 1])]
       \/ \E x \in ls.phs : lock' = [lock EXCEPT ![k][s] = Norm([ls EXCEPT !.hs = @ \ {x}, !.phs = @ \ {x}])]
    /\ UNCHANGED <<l, taken, issued, owners, split, res, now, follows>>

\* Side 2, still the old master's replica (follows), receives side 1's
\* state as it is now: the lease and, unless its clock is behind (Skewed:
\* its fences start from nothing), the fences. Nothing is recorded.
Replicate(k) ==
    /\ follows[k]
    /\ lock[k][2] # lock[k][1]
    /\ lock' = [lock EXCEPT ![k][2] = lock[k][1]]
    /\ issued' = [issued EXCEPT ![k][2] = IF Skewed THEN @ ELSE issued[k][1]]
    /\ UNCHANGED <<l, taken, owners, split, res, now, follows>>

Next == l <= Len(Trace) /\ (\/ \E i \in Ready : Take(i)
                             \/ \E k \in KeyIds : \/ Replicate(k)
                                                   \/ \E s \in Sides : Vanish(k, s))

Spec == Init /\ [][Next]_vars

\* The last event of each key (0: none).
LastOf == [k \in KeyIds |-> LET is == {i \in 1..Len(Trace) : Trace[i].k = k}
                             IN IF is = {} THEN 0 ELSE CHOOSE i \in is : \A j \in is : j <= i]

\* The trace view: the state the rules read. A key whose events were all
\* taken is read no more (keys are independent), so its state is left out:
\* the orders of one key do not multiply the states of the next.
TraceView == <<l, taken, [k \in KeyIds |-> IF LastOf[k] < l THEN <<>>
                            ELSE <<lock[k], issued[k], owners[k], split[k], res[k], now[k], follows[k]>>]>>

\* The whole trace was taken.
TraceAccepted == l = Len(Trace) + 1

\* Checked as an invariant: its violation is the accepting run.
TraceNotAccepted == ~TraceAccepted
=============================================================================
