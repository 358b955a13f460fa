------------------------------ MODULE LockQueue ------------------------------
(***************************************************************************)
(* The shipped lock's hold and queue scripts (lock/scripts.go), one lock  *)
(* key on one master, with the clients' view of their holds.             *)
(*                                                                         *)
(* FencedLock.tla models the fence, the failover and the resource; this   *)
(* module models what happens on one master between acquire and release: *)
(*  - reentrancy: the owner's token acquires again and the hold count     *)
(*    grows; every hold has its own TTL and the key's expiry only grows   *)
(*    (luaExtend); a retry of an acquire whose reply was lost (the same   *)
(*    token, reentrant flag "0") takes the lock or confirms it without    *)
(*    counting a second hold;                                             *)
(*  - renew by owner (the watchdog), release by owner, down to zero holds;*)
(*  - the FIFO queue (acquireScript's mode "w"): waiters join in arrival  *)
(*    order, each with a deadline it refreshes while alive (every        *)
(*    QueueTTL/3), and the queue key's expiry only grows (growExpire);    *)
(*    dropDead removes waiters whose deadline passed;                      *)
(*  - hand-off on release (and when an acquire finds the lock free but   *)
(*    someone else at the head): the head gets a provisional lease of     *)
(*    min(its TTL, HO) and must confirm it (acquireScript with its own    *)
(*    token) to get its TTL; a waiter that gives up passes a lock it was *)
(*    handed on (leaveScript);                                            *)
(*  - clients crash at any point (a dead waiter stays in the queue until *)
(*    its deadline passes);                                               *)
(*  - w, the hash's "somebody may be in line": the last release hands    *)
(*    the lock on only when w is set and the queue key exists; a call   *)
(*    that joins the line behind a holder sets it, a grant sets it from  *)
(*    the line it leaves behind (WaitFlag).                               *)
(*                                                                         *)
(* Time is a discrete clock (Tick); expiries are countdowns, so the state *)
(* space is finite.  A client's belief about a hold is the time it thinks *)
(* the hold is still valid for (mine), counted from the reply that        *)
(* granted or extended it: the lease's ValidUntil.  Tokens are the        *)
(* clients: a client starts a fresh acquire only when the key is not its  *)
(* own (with a fresh token it would be one more contender, which the      *)
(* other clients already are).  Nested acquires happen while the outer    *)
(* hold is valid (what reentrancy is for).                                *)
(*                                                                         *)
(* Bug selects the earlier code's behaviour, for the must-fail configs:   *)
(*   "none"        the lock as shipped                                    *)
(*   "shorten"     a nested acquire or renew sets the key's expiry to its *)
(*                 own TTL (PEXPIRE), even when that is shorter           *)
(*   "fullhandoff" hand-off grants the waiter's full TTL, not HO          *)
(*   "queuettl"    the queue key's expiry is set by the last waiter to   *)
(*                 join or refresh (PEXPIRE with its queue TTL)           *)
(*   "noconfirm"   a waiter trusts the hand-off message and counts its   *)
(*                 full TTL without confirming                            *)
(*   "retrycount"  a retried acquire counts a second hold                 *)
(*   "fromreply"   the client counts its claimed validity from the reply  *)
(*                 instead of from its request (needs Flight > 0)         *)
(*   "nowaitflag"  a waiter that joins the line behind a holder does not  *)
(*                 set w, the hash's "somebody may be in line"            *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Clients,   \* the clients (model values); a client is its token
    None,      \* "no client"
    TTLs,      \* the lease TTLs (ticks) a call may ask for
    QTTLs,     \* the queue TTLs (ticks) a waiter may use
    HO,        \* the hand-off lease (ticks)
    MaxHolds,  \* bound on a client's nested holds
    Flight,    \* ticks a fresh acquire's reply may spend in flight (0: none)
    Bug        \* see above

Bugs == {"none", "shorten", "fullhandoff", "queuettl", "noconfirm", "retrycount", "fromreply", "nowaitflag"}

ASSUME None \notin Clients
ASSUME TTLs \subseteq Nat \ {0} /\ TTLs # {} /\ QTTLs \subseteq Nat \ {0} /\ QTTLs # {}
ASSUME HO \in Nat \ {0} /\ MaxHolds \in Nat \ {0} /\ Flight \in Nat
ASSUME Bug \in Bugs

Max(S) == CHOOSE x \in S : \A y \in S : y <= x
TTLMax == Max(TTLs)
QMax == Max(QTTLs)
Max2(a, b) == IF a >= b THEN a ELSE b
Min2(a, b) == IF a <= b THEN a ELSE b

VARIABLES
    key,    \* the lock hash: [owner, n (holds), left (PTTL, ticks), prov, w]
            \* prov: a provisional hand-off lease not yet confirmed;
            \* w: somebody may be in line (may stay TRUE after the line
            \* emptied: the release then looks at the queue)
    queue,  \* the queue zset, in score (arrival) order
    qdl,    \* per client: ticks until its place in the queue expires
    qleft,  \* ticks until the queue keys expire (0: no queue key)
    pc,     \* per client: "idle", "waiting", "retry" (an acquire's reply
            \* was lost: it retries with the same token), "replying" (a
            \* grant's reply is in flight), "holding", "dead"
    holds,  \* per client: the holds it believes it has
    mine,   \* per client: the client's belief, what the lock claims to it
            \* (ValidUntil): ticks its longest hold is valid for; 0 once
            \* released or told lost (its loss notice)
    wttl,   \* per client: the lease TTL of its pending acquire
    wqt,    \* per client: the queue TTL it uses
    flight  \* per client: ticks its grant's reply has been in flight

vars == <<key, queue, qdl, qleft, pc, holds, mine, wttl, wqt, flight>>

NoKey == [owner |-> None, n |-> 0, left |-> 0, prov |-> FALSE, w |-> FALSE]

TypeOK ==
    /\ key \in [owner : Clients \cup {None}, n : 0..MaxHolds + 1,
                left : 0..TTLMax, prov : BOOLEAN, w : BOOLEAN]
    /\ queue \in Seq(Clients) /\ Len(queue) <= Cardinality(Clients)
    /\ qdl \in [Clients -> 0..QMax] /\ qleft \in 0..QMax
    /\ pc \in [Clients -> {"idle", "waiting", "retry", "replying", "holding", "dead"}]
    /\ flight \in [Clients -> 0..Flight]
    /\ holds \in [Clients -> 0..MaxHolds]
    /\ mine \in [Clients -> 0..TTLMax]
    /\ wttl \in [Clients -> TTLs] /\ wqt \in [Clients -> QTTLs]

Init ==
    /\ key = NoKey /\ queue = <<>> /\ qdl = [c \in Clients |-> 0] /\ qleft = 0
    /\ pc = [c \in Clients |-> "idle"]
    /\ holds = [c \in Clients |-> 0] /\ mine = [c \in Clients |-> 0]
    /\ wttl = [c \in Clients |-> TTLMax] /\ wqt = [c \in Clients |-> QMax]
    /\ flight = [c \in Clients |-> 0]

InQueue(c) == \E i \in 1..Len(queue) : queue[i] = c
Without(q, c) == SelectSeq(q, LAMBDA m : m # c)

-----------------------------------------------------------------------------
(* The scripts.  Each sets key, queue, qdl, qleft; got says whether it     *)
(* granted the lock to the caller.                                         *)

\* luaExtend: the key lives at least t more, never less than it had.
Extend(left, t) == IF Bug = "shorten" THEN t ELSE Max2(left, t)

\* growExpire on the queue keys.
GrowQ(ql, t) == IF Bug = "queuettl" THEN t ELSE Max2(ql, t)

\* dropDead: the waiters whose place expired leave the queue.
Live(q) == SelectSeq(q, LAMBDA m : qdl[m] > 0)

\* Sets queue and qleft; an empty zset does not exist (no expiry either).
SetQueue(q, ql) == queue' = q /\ qleft' = IF q = <<>> THEN 0 ELSE ql

\* handoff after dropDead: the head of q gets a provisional lease (w: the
\* rest of the line), or, with nobody waiting, the key is deleted.
HandoffKey(q) ==
    IF q = <<>> THEN NoKey
    ELSE [owner |-> Head(q), n |-> 1, prov |-> TRUE, w |-> Tail(q) # <<>>,
          left |-> IF Bug = "fullhandoff" THEN wttl[Head(q)] ELSE Min2(wttl[Head(q)], HO)]
HandoffQueue(q) == IF q = <<>> THEN q ELSE Tail(q)

Fresh(c, t, w) == [owner |-> c, n |-> 1, left |-> t, prov |-> FALSE, w |-> w]

\* acquireScript for token c: lease TTL t, queue TTL qt, wait (mode "w"),
\* reent (the reentrant flag).
AcquireScript(c, t, qt, wait, reent, got) ==
    IF key.owner = None /\ queue = <<>>
    THEN \* fast path: neither the lock nor the queue exists
         /\ got /\ key' = Fresh(c, t, FALSE) /\ UNCHANGED <<queue, qleft, qdl>>
    ELSE LET q == Live(queue) IN
         IF key.owner = c
         THEN /\ got
              /\ key' = [key EXCEPT !.n = IF reent THEN @ + 1 ELSE @,
                                    !.left = Extend(@, t), !.prov = FALSE]
              /\ SetQueue(q, qleft) /\ UNCHANGED qdl
         ELSE IF key.owner = None /\ (q = <<>> \/ Head(q) = c)
         THEN /\ got /\ key' = Fresh(c, t, Without(q, c) # <<>>)
              /\ SetQueue(Without(q, c), qleft) /\ UNCHANGED qdl
         ELSE LET k2 == IF key.owner = None THEN HandoffKey(q) ELSE key
                  q2 == IF key.owner = None THEN HandoffQueue(q) ELSE q
              IN /\ ~got
                 /\ key' = IF wait /\ Bug # "nowaitflag" THEN [k2 EXCEPT !.w = TRUE] ELSE k2
                 /\ IF wait
                    THEN /\ SetQueue(IF \E i \in 1..Len(q2) : q2[i] = c
                                     THEN q2 ELSE Append(q2, c), GrowQ(qleft, qt))
                         /\ qdl' = [qdl EXCEPT ![c] = qt]
                    ELSE SetQueue(q2, qleft) /\ UNCHANGED qdl

\* releaseScript by token c, at its last hold (fewer holds only count down):
\* with w unset it deletes the key without looking at the queue.
ReleaseLast ==
    IF ~key.w \/ queue = <<>>
    THEN key' = NoKey /\ UNCHANGED <<queue, qleft>>
    ELSE LET q == Live(queue) IN
         key' = HandoffKey(q) /\ SetQueue(HandoffQueue(q), qleft)

-----------------------------------------------------------------------------
(* The clients.                                                            *)

Alive(c) == pc[c] # "dead"

\* A fresh Acquire (wait) or TryAcquire (no wait).  Its reply may be lost
\* when it took the lock: the client then retries with the same token.
Acquire(c) ==
    /\ pc[c] = "idle" /\ key.owner # c
    /\ \E t \in TTLs, qt \in QTTLs, wait \in BOOLEAN, got \in BOOLEAN :
         /\ AcquireScript(c, t, qt, wait, TRUE, got)
         /\ wttl' = [wttl EXCEPT ![c] = t]
         /\ wqt' = [wqt EXCEPT ![c] = qt]
         /\ IF got
            THEN \/ /\ pc' = [pc EXCEPT ![c] = "holding"]
                    /\ holds' = [holds EXCEPT ![c] = 1]
                    /\ mine' = [mine EXCEPT ![c] = t]
                 \/ /\ pc' = [pc EXCEPT ![c] = "retry"]
                    /\ UNCHANGED <<holds, mine>>
                 \/ /\ Flight > 0
                    /\ pc' = [pc EXCEPT ![c] = "replying"]
                    /\ UNCHANGED <<holds, mine>>
            ELSE /\ pc' = [pc EXCEPT ![c] = IF wait THEN "waiting" ELSE "idle"]
                 /\ UNCHANGED <<holds, mine>>
    /\ UNCHANGED flight

\* The grant's reply arrives after flight[c] ticks: the lock claims the
\* lease valid for its TTL counted from the request, so for what is left
\* of it ("fromreply": for the whole TTL, counted from the reply).
Reply(c) ==
    /\ pc[c] = "replying"
    /\ pc' = [pc EXCEPT ![c] = "holding"]
    /\ holds' = [holds EXCEPT ![c] = 1]
    /\ mine' = [mine EXCEPT ![c] = IF Bug = "fromreply" THEN wttl[c]
                                   ELSE Max2(wttl[c] - flight[c], 0)]
    /\ flight' = [flight EXCEPT ![c] = 0]
    /\ UNCHANGED <<key, queue, qdl, qleft, wttl, wqt>>

\* A waiter tries again (woken by the hand-off message, the holder's TTL,
\* or its refresh timer), or a client whose reply was lost retries: the
\* same token, reentrant flag "0".  A grant is counted from this reply.
Retry(c) ==
    /\ pc[c] \in {"waiting", "retry"}
    /\ \E got \in BOOLEAN :
         /\ AcquireScript(c, wttl[c], wqt[c], pc[c] = "waiting", Bug = "retrycount", got)
         /\ IF got
            THEN /\ pc' = [pc EXCEPT ![c] = "holding"]
                 /\ holds' = [holds EXCEPT ![c] = 1]
                 /\ mine' = [mine EXCEPT ![c] = wttl[c]]
            ELSE /\ pc' = [pc EXCEPT ![c] = IF pc[c] = "retry" THEN "idle" ELSE "waiting"]
                 /\ UNCHANGED <<holds, mine>>
    /\ UNCHANGED <<wttl, wqt, flight>>

\* The earlier waiter ("noconfirm"): the hand-off message alone makes it a
\* holder, for its full TTL.
TrustHandoff(c) ==
    /\ Bug = "noconfirm"
    /\ pc[c] = "waiting" /\ key.owner = c /\ key.prov
    /\ pc' = [pc EXCEPT ![c] = "holding"]
    /\ holds' = [holds EXCEPT ![c] = 1]
    /\ mine' = [mine EXCEPT ![c] = wttl[c]]
    /\ UNCHANGED <<key, queue, qdl, qleft, wttl, wqt, flight>>

\* A nested acquire (TryAcquire WithOwner) while the outer hold is valid.
Reenter(c) ==
    /\ pc[c] = "holding" /\ mine[c] > 0 /\ holds[c] < MaxHolds
    /\ \E t \in TTLs :
         /\ AcquireScript(c, t, wqt[c], FALSE, TRUE, TRUE)
         /\ holds' = [holds EXCEPT ![c] = @ + 1]
         /\ mine' = [mine EXCEPT ![c] = Max2(@, t)]
    /\ UNCHANGED <<pc, wttl, wqt, flight>>

\* The watchdog renews one hold (its TTL t); if the key is not its own the
\* client learns it lost the lock.
Renew(c) ==
    /\ pc[c] = "holding"
    /\ IF key.owner = c
       THEN \E t \in TTLs :
              /\ key' = [key EXCEPT !.left = Extend(@, t)]
              /\ mine' = [mine EXCEPT ![c] = Max2(@, t)]
              /\ UNCHANGED <<pc, holds>>
       ELSE /\ pc' = [pc EXCEPT ![c] = "idle"]
            /\ holds' = [holds EXCEPT ![c] = 0]
            /\ mine' = [mine EXCEPT ![c] = 0]
            /\ UNCHANGED key
    /\ UNCHANGED <<queue, qdl, qleft, wttl, wqt, flight>>

\* Release of one hold.  A token that does not own the key changes nothing
\* (the hold was lost); the last hold hands the lock on or deletes it.
Release(c) ==
    /\ pc[c] = "holding"
    /\ IF key.owner # c
       THEN UNCHANGED <<key, queue, qleft>>
       ELSE IF key.n > 1
       THEN key' = [key EXCEPT !.n = @ - 1] /\ UNCHANGED <<queue, qleft>>
       ELSE ReleaseLast
    /\ holds' = [holds EXCEPT ![c] = IF key.owner = c THEN @ - 1 ELSE 0]
    /\ pc' = [pc EXCEPT ![c] = IF holds'[c] = 0 THEN "idle" ELSE "holding"]
    /\ mine' = [mine EXCEPT ![c] = IF holds'[c] = 0 THEN 0 ELSE @]
    /\ UNCHANGED <<qdl, wttl, wqt, flight>>

\* A waiter gives up (its ctx ended): leaveScript.  A lock it was handed
\* goes to the next waiter.
GiveUp(c) ==
    /\ pc[c] = "waiting"
    /\ LET q == Without(Live(queue), c) IN
       IF key.owner = c
       THEN key' = HandoffKey(q) /\ SetQueue(HandoffQueue(q), qleft)
       ELSE SetQueue(q, qleft) /\ UNCHANGED key
    /\ pc' = [pc EXCEPT ![c] = "idle"]
    /\ UNCHANGED <<qdl, holds, mine, wttl, wqt, flight>>

\* A client dies wherever it is; a dead waiter stays in the queue.
Crash(c) ==
    /\ Alive(c)
    /\ pc' = [pc EXCEPT ![c] = "dead"]
    /\ holds' = [holds EXCEPT ![c] = 0]
    /\ mine' = [mine EXCEPT ![c] = 0]
    /\ flight' = [flight EXCEPT ![c] = 0]
    /\ UNCHANGED <<key, queue, qdl, qleft, wttl, wqt>>

\* One tick.  Timing assumptions: a live waiter refreshes its place before
\* it expires (it does so every QueueTTL/3), and picks up a lock handed
\* to it before the hand-off lease runs out (the message, or its poll
\* every HO/2 while its subscription is unconfirmed, wakes it).
Tick ==
    /\ \A c \in Clients : pc[c] = "waiting" =>
         /\ InQueue(c) => qdl[c] > 1
         /\ key.owner = c => key.left > 1
    /\ \A c \in Clients : pc[c] = "replying" => flight[c] < Flight
    /\ flight' = [c \in Clients |-> IF pc[c] = "replying" THEN flight[c] + 1 ELSE 0]
    /\ key' = IF key.left > 1 THEN [key EXCEPT !.left = @ - 1] ELSE NoKey
    /\ qdl' = [c \in Clients |-> IF qdl[c] > 0 THEN qdl[c] - 1 ELSE 0]
    /\ IF qleft > 1 THEN qleft' = qleft - 1 /\ UNCHANGED queue
                    ELSE qleft' = 0 /\ queue' = <<>>
    /\ mine' = [c \in Clients |-> IF mine[c] > 0 THEN mine[c] - 1 ELSE 0]
    /\ UNCHANGED <<pc, holds, wttl, wqt>>

Next ==
    \/ \E c \in Clients :
         \/ Acquire(c) \/ Reply(c) \/ Retry(c) \/ TrustHandoff(c) \/ Reenter(c)
         \/ Renew(c) \/ Release(c) \/ GiveUp(c) \/ Crash(c)
    \/ Tick

\* Live clients act: waiters retry, holders release, and a holder that
\* keeps nesting still comes back to its last hold and releases it (its
\* critical section ends); time passes.
Fairness ==
    /\ SF_vars(Tick)
    /\ \A c \in Clients :
         /\ WF_vars(Retry(c)) /\ WF_vars(Release(c)) /\ WF_vars(Reply(c))
         /\ SF_vars(Release(c) /\ holds[c] = 1)

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Invariants.                                                             *)

\* G1 for every hold, and the claims property's claim-overlap: while the
\* lock tells a client a hold is valid (its belief, mine), the key is its
\* own and lives at least that long, so no other client's lease takes
\* effect inside the claim.  (Two clients cannot both believe:
\* the key has one owner.)  Breaks with "shorten" (a short nested TTL
\* shortens the outer hold), "noconfirm" (a provisional hand-off lease
\* believed for a full TTL) and "fromreply" (a claim counted from the
\* reply: the key may expire, and pass on, while the reply is in flight).
HoldsValid ==
    \A c \in Clients : mine[c] > 0 => key.owner = c /\ key.left >= mine[c]

\* Mutual exclusion of beliefs, implied by HoldsValid; stated for the
\* reader.
OneHolder ==
    \A c, d \in Clients : c # d => ~(mine[c] > 0 /\ mine[d] > 0)

\* A dead waiter delays the others by at most HO: a hand-off nobody
\* confirmed lives at most HO.  Breaks with "fullhandoff".
HandoffBounded == key.prov => key.left <= HO

\* A live waiter keeps its place in the queue (or has been handed the
\* lock).  Breaks with "queuettl".
WaitersKeepTheirPlace ==
    \A c \in Clients : pc[c] = "waiting" => InQueue(c) \/ key.owner = c

\* The holder's releases free the key: the server never counts more holds
\* than the client will release.  Breaks with "retrycount" (the key then
\* stays held after the last release, until it expires).
HoldCountSafe ==
    \A c \in Clients : pc[c] = "holding" /\ key.owner = c => key.n <= holds[c]

\* Liveness: a live waiter is served (or gives up, or dies): a dead waiter
\* ahead of it, a crashed holder or a lost reply delays it, never forever.
WaiterServed ==
    \A c \in Clients : pc[c] = "waiting" ~> pc[c] # "waiting"

\* A held lock with somebody in line says so (w), so that the release
\* that skips the queue when w is unset never strands a waiter without
\* its hand-off.  Breaks with "nowaitflag".
WaitFlag == key.owner # None /\ queue # <<>> => key.w

Perms == Permutations(Clients)
=============================================================================
