--------------------------- MODULE TraceFencedLock ---------------------------
(***************************************************************************)
(* Trace validation: does a recorded history of the fenced lock (turned   *)
(* into TraceData.tla by `lockproof trace`) follow the rules of           *)
(* FencedLock?                                                             *)
(*                                                                         *)
(* The pattern of TLA+ trace validation: a cursor l over the trace, one    *)
(* wrapper action per event kind that takes the event only if the rules    *)
(* allow it (nondeterministically where an `unknown` result leaves the     *)
(* effect open), and acceptance only when the whole trace is consumed.     *)
(* TLC checks the invariant TraceNotAccepted; a violation of it is the     *)
(* accepting run.  When no run consumes the whole trace, TLC finishes      *)
(* without error and "the depth of the complete state graph search is D": *)
(* D - 1 events could be taken, Trace[D] is the first one the rules        *)
(* refuse (tla/run.sh prints its history line).                           *)
(*                                                                         *)
(* A history is observed from outside, with real time, not the ticks of   *)
(* FencedLock: each event carries its call and return ticks, and an        *)
(* acquire or renew the bounds of its lease (surely valid until lo,        *)
(* surely expired after hi, with the contract's clock drift).  The rules  *)
(* are FencedLock's server and resource rules, checked against those       *)
(* bounds:                                                                 *)
(*  - an ok acquire needs the key free or its lease possibly expired (or  *)
(*    possibly lost by a failover fault window overlapping the lease),    *)
(*    and a token above every token issued for the key                   *)
(*    (unless such a fault may have lost the counter);                    *)
(*  - an ok release or renew needs the owner and token of the lease and   *)
(*    the lease not surely expired; a failed one needs that the lease     *)
(*    was not surely valid and owned;                                     *)
(*  - a resource op is accepted iff FencingRule accepts its (token,       *)
(*    client); a read returns the value of the last accepted write, and a *)
(*    write with prev finds prev there (no lost update);                  *)
(*  - fail and unknown acquires change nothing (an acquire nobody knows   *)
(*    succeeded hands out no token that is used later).                   *)
(***************************************************************************)
EXTENDS Integers, Sequences, TraceData, FencingRule

VARIABLES
    l,       \* the cursor: Trace[l] is the next event to take
    lock,    \* per key: the current lease [owner, tok, call, lo, hi]
    issued,  \* per key: the highest token an ok acquire returned
    res      \* per key: the resource [maxTok, owner, val]

vars == <<l, lock, issued, res>>

KeyIds == 1..NumKeys
NoLease == [owner |-> 0, tok |-> 0, call |-> 0, lo |-> 0, hi |-> 0]

Init ==
    /\ l = 1
    /\ lock = [k \in KeyIds |-> NoLease]
    /\ issued = [k \in KeyIds |-> 0]
    /\ res = [k \in KeyIds |-> [maxTok |-> 0, owner |-> 0, val |-> 0]]

E == Trace[l]

\* Fault windows that may lose the lock key and the counter.
LossWindows ==
    { Trace[i] : i \in { j \in DOMAIN Trace :
        Trace[j].kind = "fault" /\ Trace[j].fault = "failover" } }

\* A loss may have happened between times from and to.
MayBeLost(from, to) == \E f \in LossWindows : f.call <= to /\ f.ret >= from

MayHaveExpired(ls, t) == ls.owner = 0 \/ t >= ls.lo
SurelyExpired(ls, t) == t > ls.hi
Owns(ls, e) == ls.owner = e.c /\ ls.tok = e.tok /\ e.tok > 0

Step(kind) == E.kind = kind

-----------------------------------------------------------------------------
AcquireEv ==
    /\ Step("acquire")
    /\ LET k == E.k IN
       IF E.res = "ok"
       THEN /\ MayHaveExpired(lock[k], E.ret) \/ MayBeLost(lock[k].call, E.ret)
            /\ E.tok > issued[k] \/ MayBeLost(0, E.ret)
            /\ lock' = [lock EXCEPT ![k] =
                          [owner |-> E.c, tok |-> E.tok, call |-> E.call, lo |-> E.lo, hi |-> E.hi]]
            /\ issued' = [issued EXCEPT ![k] = IF E.tok > @ THEN E.tok ELSE @]
            /\ UNCHANGED res
       ELSE UNCHANGED <<lock, issued, res>>

\* A release or renew that failed although the lease was surely valid and
\* owned by its client breaks the rules.
FailOK(ls) ==
    ~(Owns(ls, E) /\ E.ret < ls.lo) \/ MayBeLost(ls.call, E.ret)

ReleaseEv ==
    /\ Step("release")
    /\ LET k == E.k
           ls == lock[k]
           took == Owns(ls, E) /\ ~SurelyExpired(ls, E.call)
       IN CASE E.res = "ok" -> took /\ lock' = [lock EXCEPT ![k] = NoLease]
            [] E.res = "fail" -> FailOK(ls) /\ UNCHANGED lock
            [] OTHER -> \/ UNCHANGED lock
                        \/ took /\ lock' = [lock EXCEPT ![k] = NoLease]
    /\ UNCHANGED <<issued, res>>

RenewEv ==
    /\ Step("renew")
    /\ LET k == E.k
           ls == lock[k]
           took == Owns(ls, E) /\ ~SurelyExpired(ls, E.call)
       IN CASE E.res = "ok" -> took /\ lock' = [lock EXCEPT ![k].lo = E.lo, ![k].hi = E.hi]
            [] E.res = "fail" -> FailOK(ls) /\ UNCHANGED lock
            [] OTHER -> \/ UNCHANGED lock
                        \/ /\ took
                           /\ lock' = [lock EXCEPT ![k].lo = IF E.lo < @ THEN E.lo ELSE @,
                                                   ![k].hi = Never]
    /\ UNCHANGED <<issued, res>>

\* The resource takes op e on key k (the fence rises to (tok, c)).
Fenced(k) == Accepts(TRUE, TRUE, E.tok, E.c, res[k].maxTok, res[k].owner)
Raise(k, val) ==
    res' = [res EXCEPT ![k] = [maxTok |-> E.tok,
                               owner |-> E.c,
                               val |-> val]]

WriteEv ==
    /\ Step("write")
    /\ LET k == E.k
           apply == /\ Fenced(k)
                    /\ E.prev < 0 \/ E.prev = res[k].val
                    /\ Raise(k, E.val)
       IN CASE E.res = "ok" -> apply
            [] E.res = "rejected" -> ~Fenced(k) /\ UNCHANGED res
            [] OTHER -> UNCHANGED res \/ apply
    /\ UNCHANGED <<lock, issued>>

ReadEv ==
    /\ Step("read")
    /\ LET k == E.k IN
       CASE E.res = "ok" -> Fenced(k) /\ E.val = res[k].val /\ Raise(k, res[k].val)
         [] E.res = "rejected" -> ~Fenced(k) /\ UNCHANGED res
         [] OTHER -> UNCHANGED res \/ (Fenced(k) /\ Raise(k, res[k].val))
    /\ UNCHANGED <<lock, issued>>

\* Fault windows are read through LossWindows; the event itself is a no-op.
FaultEv ==
    /\ Step("fault")
    /\ UNCHANGED <<lock, issued, res>>

Next ==
    /\ l <= Len(Trace)
    /\ AcquireEv \/ ReleaseEv \/ RenewEv \/ WriteEv \/ ReadEv \/ FaultEv
    /\ l' = l + 1

Spec == Init /\ [][Next]_vars

\* The trace view: the cursor and the state the rules read (all of it).
TraceView == <<l, lock, issued, res>>

\* The whole trace was taken.
TraceAccepted == l = Len(Trace) + 1

\* Checked as an invariant: its violation is the accepting run.
TraceNotAccepted == ~TraceAccepted
=============================================================================
