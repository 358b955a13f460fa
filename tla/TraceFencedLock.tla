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
(*  - an ok release or renew needs the owner and token of the lease and   *)
(*    the lease not surely expired; a failed one needs that the lease     *)
(*    was not surely valid and owned;                                     *)
(*  - a resource op is accepted iff FencingRule accepts its (token,       *)
(*    client); a read returns the value of the last accepted write, and a *)
(*    write with prev finds prev there (no lost update);                  *)
(*  - fail and unknown acquires change nothing (an acquire nobody knows   *)
(*    succeeded hands out no token that is used later).                   *)
(*                                                                         *)
(* Failover (split brain, as in FencedLock).  An op that overlaps a       *)
(* failover fault window (Trace[i].win) may be served by either of two    *)
(* masters: side 1, the one before the window, or side 2, the promoted    *)
(* replica, which starts the window with side 1's lease or without it     *)
(* (the replica had not received the grant) and with side 1's fences      *)
(* (the fence reads the clock: a promoted master's fences exceed the lost *)
(* ones).  Each side follows the rules on its own; the first op of the    *)
(* key after the window finds one survivor's lease and fences above both. *)
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
    lock,    \* per key, per side: the current lease [owner, tok, n, call, lo, hi]
             \* (n: the holds its owner took with that fence)
    issued,  \* per key, per side: the highest fence that master issued
    owners,  \* per key: the <<fence, client>> of every ok acquire
    split,   \* per key: TRUE while its ops may go to two masters
    res      \* per key: the resource [maxTok, owner, val]

vars == <<l, taken, lock, issued, owners, split, res>>

KeyIds == 1..NumKeys
Sides == {1, 2}
NoLease == [owner |-> 0, tok |-> 0, n |-> 0, call |-> 0, lo |-> 0, hi |-> 0]
Max2(a, b) == IF a >= b THEN a ELSE b

Init ==
    /\ l = 1 /\ taken = {}
    /\ lock = [k \in KeyIds |-> [s \in Sides |-> NoLease]]
    /\ issued = [k \in KeyIds |-> [s \in Sides |-> 0]]
    /\ owners = [k \in KeyIds |-> {}]
    /\ split = [k \in KeyIds |-> FALSE]
    /\ res = [k \in KeyIds |-> [maxTok |-> 0, owner |-> 0, val |-> 0]]
    /\ TLCSet(1, 1)

MayHaveExpired(ls, t) == ls.owner = 0 \/ t >= ls.lo
SurelyExpired(ls, t) == t > ls.hi
Owns(ls, e) == ls.owner = e.c /\ ls.tok = e.tok /\ e.tok > 0
LeaseOf(e) == [owner |-> e.c, tok |-> e.tok, n |-> 1, call |-> e.call, lo |-> e.lo, hi |-> e.hi]

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

\* Key k's lease on side s becomes ls; the fences stay.
SetLease(k, p, s, ls) ==
    /\ lock' = [lock EXCEPT ![k] = [p.lk EXCEPT ![s] = ls]]
    /\ issued' = [issued EXCEPT ![k] = p.iss]

-----------------------------------------------------------------------------
AcquireOK(e, k, p, s) ==
    LET ls == p.lk[s] IN
    \/ \* a new lease: free or possibly expired, a fresh fence
       /\ MayHaveExpired(ls, e.ret)
       /\ e.tok > p.iss[s]
       /\ \A o \in owners[k] : o[1] = e.tok => o[2] = e.c
       /\ lock' = [lock EXCEPT ![k] = [p.lk EXCEPT ![s] = LeaseOf(e)]]
       /\ issued' = [issued EXCEPT ![k] = [p.iss EXCEPT ![s] = e.tok]]
       /\ owners' = [owners EXCEPT ![k] = @ \cup {<<e.tok, e.c>>}]
    \/ \* the owner again (reentrancy): its own fence, one more hold, and
       \* the lease lives at least as long as both
       /\ Owns(ls, e) /\ ~SurelyExpired(ls, e.call)
       /\ SetLease(k, p, s, [ls EXCEPT !.n = @ + 1, !.lo = Max2(@, e.lo), !.hi = Max2(@, e.hi)])
       /\ UNCHANGED owners

AcquireEv(e) ==
    /\ e.kind = "acquire"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         IF e.res = "ok" THEN AcquireOK(e, k, p, s)
         ELSE SetLease(k, p, s, p.lk[s]) /\ UNCHANGED owners
    /\ UNCHANGED res

\* A release or renew that failed although the lease was surely valid and
\* owned by its client breaks the rules.
FailOK(ls, e) == ~(Owns(ls, e) /\ e.ret < ls.lo)

ReleaseEv(e) ==
    /\ e.kind = "release"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         LET ls == p.lk[s]
             took == Owns(ls, e) /\ ~SurelyExpired(ls, e.call)
             \* one hold fewer; the last one frees the key
             after == IF ls.n > 1 THEN [ls EXCEPT !.n = @ - 1] ELSE NoLease
         IN CASE e.res = "ok" -> took /\ SetLease(k, p, s, after)
              [] e.res = "fail" -> FailOK(ls, e) /\ SetLease(k, p, s, ls)
              [] OTHER -> \/ SetLease(k, p, s, ls)
                          \/ took /\ SetLease(k, p, s, after)
    /\ UNCHANGED <<owners, res>>

RenewEv(e) ==
    /\ e.kind = "renew"
    /\ LET k == e.k IN
       \E p \in Pre(k, e), s \in SidesOf(e) :
         LET ls == p.lk[s]
             took == Owns(ls, e) /\ ~SurelyExpired(ls, e.call)
         \* The lock's expiry only grows (luaExtend): a renew with a shorter
         \* TTL than another hold's does not shorten the lease.
         IN CASE e.res = "ok" -> took /\ SetLease(k, p, s, [ls EXCEPT !.lo = Max2(@, e.lo), !.hi = Max2(@, e.hi)])
              [] e.res = "fail" -> FailOK(ls, e) /\ SetLease(k, p, s, ls)
              [] OTHER -> \/ SetLease(k, p, s, ls)
                          \/ took /\ SetLease(k, p, s, [ls EXCEPT !.hi = Never])
    /\ UNCHANGED <<owners, res>>

\* The resource takes op e on key k (the fence rises to (tok, c)).
Fenced(e) == Accepts(TRUE, TRUE, e.tok, e.c, res[e.k].maxTok, res[e.k].owner)
Raise(e, val) ==
    res' = [res EXCEPT ![e.k] = [maxTok |-> e.tok, owner |-> e.c, val |-> val]]

WriteEv(e) ==
    /\ e.kind = "write"
    /\ LET apply == /\ Fenced(e)
                    /\ e.prev < 0 \/ e.prev = res[e.k].val
                    /\ Raise(e, e.val)
       IN CASE e.res = "ok" -> apply
            [] e.res = "rejected" -> ~Fenced(e) /\ UNCHANGED res
            [] OTHER -> UNCHANGED res \/ apply
    /\ UNCHANGED <<lock, issued, owners>>

ReadEv(e) ==
    /\ e.kind = "read"
    /\ CASE e.res = "ok" -> Fenced(e) /\ e.val = res[e.k].val /\ Raise(e, res[e.k].val)
         [] e.res = "rejected" -> ~Fenced(e) /\ UNCHANGED res
         [] OTHER -> UNCHANGED res \/ (Fenced(e) /\ Raise(e, res[e.k].val))
    /\ UNCHANGED <<lock, issued, owners>>

\* Fault windows are read through the events' win flags; the event itself
\* is a no-op.
FaultEv(e) ==
    /\ e.kind = "fault"
    /\ UNCHANGED <<lock, issued, owners, res>>

-----------------------------------------------------------------------------
\* The events that may be taken next: pending, within l's window, and not
\* after a pending event that returned before they were called.
Ready ==
    { i \in l..Trace[l].upto :
        /\ i \notin taken
        /\ \A j \in l..(i - 1) : j \in taken \/ Trace[j].ret >= Trace[i].call }

\* The first pending event once the events in t are taken.
FirstPending(t) ==
    CHOOSE m \in l..(Len(Trace) + 1) : m \notin t /\ \A x \in l..(m - 1) : x \in t

Take(i) ==
    /\ LET e == Trace[i] IN
       /\ AcquireEv(e) \/ ReleaseEv(e) \/ RenewEv(e) \/ WriteEv(e) \/ ReadEv(e) \/ FaultEv(e)
       \* the lock's ops open and close windows; the resource has no sides
       /\ split' = IF e.kind \in {"acquire", "release", "renew"}
                   THEN [split EXCEPT ![e.k] = e.win] ELSE split
    /\ LET t == taken \cup {i} IN
         /\ l' = FirstPending(t)
         /\ taken' = {x \in t : x > l'}
    \* Report progress: the highest first-pending event reached so far.
    /\ IF l' > TLCGet(1) THEN TLCSet(1, l') /\ PrintT(<<"pending", l'>>) ELSE TRUE

Next == l <= Len(Trace) /\ \E i \in Ready : Take(i)

Spec == Init /\ [][Next]_vars

\* The trace view: the state the rules read (all of it).
TraceView == vars

\* The whole trace was taken.
TraceAccepted == l = Len(Trace) + 1

\* Checked as an invariant: its violation is the accepting run.
TraceNotAccepted == ~TraceAccepted
=============================================================================
