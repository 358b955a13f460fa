------------------------------ MODULE LockLine ------------------------------
(***************************************************************************)
(* The line of waiters, by call (lock/scripts.go: acquireScript,          *)
(* leaveScript, handoff), on one master.                                   *)
(*                                                                         *)
(* LockQueue.tla models the queue as a line of clients: its Acquire       *)
(* requires that the key's owner is not the caller, so one owner never    *)
(* has two calls and a place is a client's.  The lock's places are        *)
(* calls': a WithOwner call queues as "<ttl>#<call id>:<token>", so that  *)
(* an owner's new wait never takes over the place its earlier call left   *)
(* behind (ZADD NX keeps a member's old score: with places by token, the  *)
(* owner's next wait took the old one and jumped the line), and a call   *)
(* served while it waits leaves its place (round three's defect 4: a      *)
(* place left behind was handed the lock back).  This module models the  *)
(* line by call, with the late leave the TLA+ review (shared notes,       *)
(* tla-review.md) found missing: a waiter that gives up sends its leave,  *)
(* which lands at any later time, its place standing until then.         *)
(*                                                                         *)
(* Not here: time (places and hand-offs do not expire, so every           *)
(* violation is one of the line, not of a TTL: LockQueue has them), lost  *)
(* replies and the cleanup (LockRecovery), the fence (FencedLock), pub/   *)
(* sub (a waiter asks again whenever it likes, as a notice or its poll    *)
(* makes it).                                                             *)
(*                                                                         *)
(* A call's life (pc): idle -> acq (request sent) -> held (granted) |     *)
(*   queued (refused, in line: mode "w") | done (refused: mode "t");      *)
(*   queued -> acq (asks again) | done (gave up: its leave is sent);      *)
(*   held -> done (release, one atomic step).                             *)
(*                                                                         *)
(* Bug selects the earlier code's behaviour, for the must-fail configs:   *)
(*   "none"       the scripts as shipped: a hand-off is its place's call's *)
(*                (p holds the call id): only that call picks it up, and   *)
(*                only its leave passes it on                              *)
(*   "anycall"    a hand-off is its token's (p a flag, round three's       *)
(*                scripts): any call of the owner picks up a hand-off to   *)
(*                another call's place, which, still waiting, has lost it  *)
(*                (a free lock goes to whoever asks next), or to the place *)
(*                of a call that gave up, its leave still on its way, past *)
(*                the waiters behind it; and any call's leave passes on a  *)
(*                hand-off to its owner's other call                       *)
(*   "bytoken"    places by token: an owner's calls share one member,      *)
(*                and ZADD NX keeps the place its earlier call left        *)
(*   "keepplace"  a waiting call served through the owner's hold (a        *)
(*                pickup, or reentrancy) keeps its place in line           *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Owner,       \* the WithOwner token the owner's calls share
    OwnerCalls,  \* the owner's calls
    FreshCalls,  \* calls of fresh tokens, each its own token
    Bug          \* see above

Bugs == {"none", "anycall", "bytoken", "keepplace"}
None == "none"
Calls == OwnerCalls \cup FreshCalls

ASSUME OwnerCalls \cap FreshCalls = {} /\ Owner \notin Calls
ASSUME Bug \in Bugs

Tok(x) == IF x \in OwnerCalls THEN Owner ELSE x
Tokens == {Owner} \cup FreshCalls

\* A call's member in the queue's sorted set.
Mem(x) == IF Bug = "bytoken" THEN Tok(x) ELSE x
\* The token a member stands for (handoff parses it out).
TokOf(m) == IF m \in Calls THEN Tok(m) ELSE m

VARIABLES
    holder,  \* the lock hash's o (None: no hash)
    n,       \* its n
    p,       \* its p: a hand-off its token has not picked up
    line,    \* the queue, in score order (a sequence of members)
    net,     \* the requests in transit: acquires and leaves
    pc,      \* per call, see above
    mode,    \* per call: "w" waits in line, "t" tries once
    order,   \* the calls in the order their waits first reached the
             \* server (the queue's scores are the server's clock)
    hfor,    \* the call whose place the pending hand-off went to (None:
             \* none, or a place by token)
    jumped   \* a grant that passed a waiter who arrived first (for NoJump)

vars == <<holder, n, p, line, net, pc, mode, order, hfor, jumped>>

Msgs == [t : {"acq", "leave"}, id : Calls]

TypeOK ==
    /\ holder \in Tokens \cup {None}
    /\ n \in 0..Cardinality(Calls) /\ p \in BOOLEAN
    /\ line \in Seq(Calls \cup Tokens)
    /\ net \subseteq Msgs
    /\ pc \in [Calls -> {"idle", "acq", "queued", "held", "done"}]
    /\ mode \in [Calls -> {"w", "t"}]
    /\ order \in Seq(Calls)
    /\ hfor \in Calls \cup {None}
    /\ jumped \in BOOLEAN

Init ==
    /\ holder = None /\ n = 0 /\ p = FALSE /\ line = <<>>
    /\ net = {}
    /\ pc = [x \in Calls |-> "idle"]
    /\ mode \in [Calls -> {"w", "t"}]
    /\ order = <<>>
    /\ hfor = None
    /\ jumped = FALSE

-----------------------------------------------------------------------------
(* The line.                                                               *)

Without(s, m) == SelectSeq(s, LAMBDA e : e # m)
\* ZADD NX: a member already in line l keeps its place.
Join(l, m) == IF \E i \in 1..Len(l) : l[i] = m THEN l ELSE Append(l, m)

\* The calls of other tokens still waiting that reached the server before
\* call x did (a try that never queued arrives last): a grant to x while
\* one of them waits passes it.  (An owner's calls share its holds: one
\* of them served at the owner's place passes nobody else.)
Arrival(x) == IF \E i \in 1..Len(order) : order[i] = x
              THEN CHOOSE i \in 1..Len(order) : order[i] = x ELSE 0
Before(x) == {y \in Calls : Tok(y) # Tok(x) /\ pc[y] = "queued" /\ Arrival(y) # 0
                            /\ (Arrival(x) = 0 \/ Arrival(y) < Arrival(x))}

\* handoff: the lock to the head's token, provisional (p), or deleted.
\* HandTo: the lock to the head of l, provisional, at the head's place.
HandTo(l) ==
    /\ holder' = TokOf(Head(l)) /\ n' = 1 /\ p' = TRUE
    /\ hfor' = IF Head(l) \in Calls THEN Head(l) ELSE None
Handoff(l) ==
    IF l = <<>> THEN holder' = None /\ n' = 0 /\ p' = FALSE /\ line' = l /\ hfor' = None
    ELSE HandTo(l) /\ line' = Tail(l)

\* A grant through the place of call y (x's own, or the one a hand-off
\* went to) passes a waiter that reached the server before: y's arrival
\* counts while y still waits, x's own once y is gone (a stale place).
Passes(x, y) == Before(IF y \in Calls /\ pc[y] = "queued" THEN y ELSE x) # {}

\* The pending hand-off is call x's to pick up (or to pass on): its own
\* place's, or its token's when p is a flag (anycall) or places are by
\* token.
Mine(x) == Bug \in {"anycall", "bytoken"} \/ hfor = x

-----------------------------------------------------------------------------
(* The scripts, one atomic step each; the sender hears the reply.         *)

\* acquireScript of call x. The owner's path serves x through its hold (a
\* pickup of a hand-off that is x's, or reentrancy on a confirmed hold): a
\* waiting call leaves its place.  A hand-off pending for another call of
\* the owner takes x nothing: the lock is taken.
\* A free lock goes to x if the line is empty or x's member heads it;
\* else the head is handed the lock and x (waiting) joins the line.
Acquire(x) ==
    LET m == Mem(x)
        w == mode[x] = "w"
    IN
    /\ order' = IF w /\ Arrival(x) = 0 THEN Append(order, x) ELSE order
    /\ IF holder = Tok(x) /\ (~p \/ Mine(x))
       THEN /\ line' = IF w /\ Bug # "keepplace" THEN Without(line, m) ELSE line
            /\ n' = IF p THEN n ELSE n + 1
            /\ p' = FALSE /\ holder' = holder
            /\ pc' = [pc EXCEPT ![x] = "held"]
            \* A pickup is a grant from the line; reentrancy is not.
            /\ jumped' = (jumped \/ (p /\ Passes(x, hfor)))
            /\ hfor' = IF p THEN None ELSE hfor
       ELSE IF holder = None /\ (line = <<>> \/ Head(line) = m)
       THEN /\ holder' = Tok(x) /\ n' = 1 /\ p' = FALSE
            /\ line' = Without(line, m)
            /\ pc' = [pc EXCEPT ![x] = "held"]
            /\ jumped' = (jumped \/ Passes(x, None))
            /\ hfor' = None
       ELSE IF holder = None
       THEN /\ HandTo(line)
            /\ line' = IF w THEN Join(Tail(line), m) ELSE Tail(line)
            /\ pc' = [pc EXCEPT ![x] = IF w THEN "queued" ELSE "done"]
            /\ UNCHANGED jumped
       ELSE /\ line' = IF w THEN Join(line, m) ELSE line
            /\ UNCHANGED <<holder, n, p, hfor, jumped>>
            /\ pc' = [pc EXCEPT ![x] = IF w THEN "queued" ELSE "done"]

\* leaveScript, sent by the call itself: its place goes; a hand-off to it
\* that it has not picked up (a fresh token's hold, or the owner's
\* provisional one given at x's place) is passed on.
Leave(x) ==
    LET l == Without(line, Mem(x)) IN
    /\ IF holder = Tok(x) /\ (x \in FreshCalls \/ (p /\ Mine(x)))
       THEN Handoff(l)
       ELSE line' = l /\ UNCHANGED <<holder, n, p, hfor>>
    /\ UNCHANGED <<pc, order, jumped>>

-----------------------------------------------------------------------------
(* The calls.                                                              *)

\* A call sends its acquire; a waiter asks again (notified, or polling).
Ask(x) ==
    /\ pc[x] \in {"idle", "queued"}
    /\ [t |-> "acq", id |-> x] \notin net
    /\ pc' = [pc EXCEPT ![x] = "acq"]
    /\ net' = net \cup {[t |-> "acq", id |-> x]}
    /\ UNCHANGED <<holder, n, p, line, mode, order, hfor, jumped>>

\* A waiter gives up: its leave is on its way, and lands when it lands.
GiveUp(x) ==
    /\ pc[x] = "queued"
    /\ pc' = [pc EXCEPT ![x] = "done"]
    /\ net' = net \cup {[t |-> "leave", id |-> x]}
    /\ UNCHANGED <<holder, n, p, line, mode, order, hfor, jumped>>

\* The holder releases (releaseScript, one hold): the last one hands off.
Release(x) ==
    /\ pc[x] = "held"
    /\ pc' = [pc EXCEPT ![x] = "done"]
    /\ IF n > 1 THEN n' = n - 1 /\ UNCHANGED <<holder, p, line, hfor>>
       ELSE Handoff(line)
    /\ UNCHANGED <<net, mode, order, jumped>>

\* Redis runs request m; its reply (for an acquire) reaches the sender.
Deliver(m) ==
    /\ m \in net
    /\ net' = net \ {m}
    /\ IF m.t = "acq" THEN Acquire(m.id) ELSE Leave(m.id)
    /\ UNCHANGED mode

Next ==
    \/ \E x \in Calls : Ask(x) \/ GiveUp(x) \/ Release(x)
    \/ \E m \in net : Deliver(m)

Spec == Init /\ [][Next]_vars

Perms == Permutations(OwnerCalls) \cup Permutations(FreshCalls)

-----------------------------------------------------------------------------
(* What the lock promises.                                                 *)

\* No caller jumps the line: the lock goes from the line (a free lock to
\* the head, a hand-off picked up) only to a call that no waiting call
\* reached the server before.  A place left behind by an owner's call
\* (one that gave up, its leave still on its way, or one served through
\* the owner's hold) must not carry a later call of the owner past
\* those who waited.
NoJump == ~jumped

\* The waiters still in line stand in the order they arrived.
LineInArrivalOrder ==
    \A i, j \in 1..Len(line) :
        i < j => \A x, y \in Calls :
            (Mem(x) = line[i] /\ Mem(y) = line[j] /\ pc[x] = "queued" /\ pc[y] = "queued"
             /\ x # y) => Arrival(x) < Arrival(y)
\* No orphan place: a place in line, and a hand-off not picked up, belong to
\* a call that still waits (or asks again), or whose leave is on its way.
\* An orphan place is handed the lock when its turn comes, and nobody
\* picks it up: every waiter behind it waits a hand-off lease for nothing
\* (round three's defect 4, a place left behind by a call served through
\* the owner's hold, whose hand-off the owner's next call took).
Waits(x) == pc[x] \in {"queued", "acq"} \/ [t |-> "leave", id |-> x] \in net
NoOrphanPlace ==
    /\ \A i \in 1..Len(line) : line[i] \in Calls => Waits(line[i])
    /\ (p /\ hfor # None) => Waits(hfor)
=============================================================================
