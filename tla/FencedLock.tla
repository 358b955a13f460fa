----------------------------- MODULE FencedLock -----------------------------
(***************************************************************************)
(* lockproof's fenced Redis lease lock, with the faults the chaos harness *)
(* injects.                                                                *)
(*                                                                         *)
(*  - Two Redis nodes, each with its own clock: node 1 is the master at   *)
(*    first and its clock is Skew ticks ahead of node 2's.  A node keeps   *)
(*    the lock key (owner, fence, ticks left) and the fence counter.       *)
(*    Acquire is one atomic script (acquireScript's grant): if the key is  *)
(*    free, fence = max(counter + 1, the node's clock) (FenceRule          *)
(*    "clock", as shipped; "counter" is counter + 1, the earlier code),    *)
(*    the counter becomes the fence and the key gets its TTL.  A node      *)
(*    grants at most once per tick: a tick is shorter than any grant (the  *)
(*    clock is in µs), so the clock moves between two grants.             *)
(*  - Time is a discrete clock: Tick makes one tick pass for everybody,    *)
(*    up to MaxTime; then the clocks stop (a node grants once more at     *)
(*    most, and down-after no longer passes) while keys still expire.     *)
(*    Leases are countdowns; a key whose countdown reaches 0 is deleted.  *)
(*  - Asynchronous replication: the replica's copy of the key and counter *)
(*    may lag the master.  A failover: the master is isolated (Isolate);   *)
(*    after FailoverDelay ticks (Sentinel's down-after) the replica is     *)
(*    promoted (Promote), losing the writes it had not received (a grant   *)
(*    and its fence); then the old master rejoins as a replica of the new  *)
(*    one and loses whatever it did meanwhile (Heal).  With SplitBrain the *)
(*    isolated old master still serves the clients on its side, before    *)
(*    and after the promotion, until it rejoins.                           *)
(*  - Clients: acquire, renew (the watchdog), write to the resource,       *)
(*    release.  A write is two steps: the client checks that it believes   *)
(*    its lease is valid and decides to write (StartWrite), then the write *)
(*    reaches the resource (DeliverWrite).  A client paused in between     *)
(*    (stop-the-world GC, SIGSTOP) takes no steps while time passes.       *)
(*    Without pauses a running client delivers before its lease ends (the  *)
(*    timing assumption every lease lock makes).  A client may crash.      *)
(*  - The resource accepts a write per FencingRule.                        *)
(*                                                                         *)
(* The fault switches are constants so that configs select scenarios.     *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, TLC, FencingRule

CONSTANTS
    Clients,       \* the clients (model values)
    None,          \* "no client" (a model value not in Clients)
    TTL,           \* lease length in ticks
    MaxToken,      \* bound on fences (keeps the model finite)
    MaxTime,       \* the clocks stop here (keeps the model finite)
    MaxFailovers,  \* bound on failovers
    Skew,          \* ticks node 1's clock is ahead of node 2's
    FailoverDelay, \* ticks from the master's isolation to the promotion
    FenceRule,     \* "clock": max(counter + 1, clock); "counter": counter + 1
    Pauses,        \* BOOLEAN: clients may be paused (pause-client)
    Failover,      \* BOOLEAN: the master may be isolated and replaced (failover)
    SplitBrain,    \* BOOLEAN: the isolated master still serves some clients
    Crashes,       \* BOOLEAN: clients may crash (crash-client)
    Fencing,       \* BOOLEAN: the resource checks tokens at all
    TieBreak       \* BOOLEAN: on an equal token the resource checks the owner

ASSUME TTL \in Nat \ {0} /\ MaxToken \in Nat /\ MaxFailovers \in Nat
ASSUME MaxTime \in Nat \ {0} /\ Skew \in Nat /\ FailoverDelay \in Nat
ASSUME FenceRule \in {"clock", "counter"}
ASSUME None \notin Clients
ASSUME \A b \in {Pauses, Failover, SplitBrain, Crashes, Fencing, TieBreak} : b \in BOOLEAN

Nodes == {1, 2}
Other(n) == 3 - n
Max2(a, b) == IF a >= b THEN a ELSE b

VARIABLES
    now,       \* the true time (node 2's clock; node 1's is Skew ahead)
    store,     \* per node: lock key and counter [owner, tok, left, ctr]
    lastAt,    \* per node: the time of its last grant (0: none)
    prim,      \* the node Sentinel names master
    old,       \* the isolated old master while a failover is on, else 0
    since,     \* ticks the master has been isolated (saturates at FailoverDelay)
    failovers, \* failovers so far
    pc,        \* client state: "idle", "holding" or "crashed"
    tok,       \* the token a client got with its lease
    pending,   \* TRUE: the client decided to write and the write is in flight
    paused,    \* TRUE: the client is stopped (takes no steps)
    wrote,     \* TRUE: the client already wrote under its current lease
    granted,   \* ticks left of the lease c was granted, by the true clock; it
               \* is also c's own timer (clients' timers do not drift here)
    maxTok,    \* resource: highest accepted token
    maxOwner,  \* resource: the client that wrote with maxTok
    lastTok,   \* ghost: token of the last accepted write
    accepted,  \* ghost: set of <<token, client>> of accepted writes
    fences,    \* ghost: set of <<fence, client>> of every grant by any node
    lastFence  \* ghost: the fence of the latest grant

lockVars == <<store, lastAt, prim, old, since, failovers>>
clientVars == <<pc, tok, pending, paused, wrote, granted>>
resVars == <<maxTok, maxOwner, lastTok, accepted>>
ghostVars == <<fences, lastFence>>
vars == <<now, lockVars, clientVars, resVars, ghostVars>>

Store == [owner : Clients \cup {None}, tok : 0..MaxToken, left : 0..TTL, ctr : 0..MaxToken]
NoStore == [owner |-> None, tok |-> 0, left |-> 0, ctr |-> 0]

TypeOK ==
    /\ now \in 1..MaxTime
    /\ store \in [Nodes -> Store] /\ lastAt \in [Nodes -> 0..MaxTime]
    /\ prim \in Nodes /\ old \in Nodes \cup {0} /\ since \in 0..FailoverDelay
    /\ failovers \in 0..MaxFailovers
    /\ pc \in [Clients -> {"idle", "holding", "crashed"}]
    /\ tok \in [Clients -> 0..MaxToken]
    /\ pending \in [Clients -> BOOLEAN]
    /\ paused \in [Clients -> BOOLEAN]
    /\ wrote \in [Clients -> BOOLEAN]
    /\ granted \in [Clients -> 0..TTL]
    /\ maxTok \in 0..MaxToken /\ maxOwner \in Clients \cup {None}
    /\ lastTok \in 0..MaxToken
    /\ accepted \subseteq (1..MaxToken) \X Clients
    /\ fences \subseteq (1..MaxToken) \X Clients /\ lastFence \in 0..MaxToken

Init ==
    /\ now = 1
    /\ store = [n \in Nodes |-> NoStore]
    /\ lastAt = [n \in Nodes |-> 0]
    /\ prim = 1 /\ old = 0 /\ since = 0
    /\ failovers = 0
    /\ pc = [c \in Clients |-> "idle"]
    /\ tok = [c \in Clients |-> 0]
    /\ pending = [c \in Clients |-> FALSE]
    /\ paused = [c \in Clients |-> FALSE]
    /\ wrote = [c \in Clients |-> FALSE]
    /\ granted = [c \in Clients |-> 0]
    /\ maxTok = 0 /\ maxOwner = None /\ lastTok = 0 /\ accepted = {}
    /\ fences = {} /\ lastFence = 0

\* A node's clock.
Clock(n) == IF n = 1 THEN now + Skew ELSE now

\* The nodes a client can reach: the master; while the master is isolated,
\* nobody (before the promotion) or the new master, and with SplitBrain the
\* old one too.
Reach ==
    IF old = 0 THEN {prim}
    ELSE (IF prim # old THEN {prim} ELSE {}) \cup (IF SplitBrain THEN {old} ELSE {})

\* A running client: not crashed, not paused.
Running(c) == pc[c] # "crashed" /\ ~paused[c]

\* The key after one tick: the countdown goes down; at 0 Redis deletes it.
Dec(s) == IF s.left > 1 THEN [s EXCEPT !.left = @ - 1]
          ELSE [s EXCEPT !.owner = None, !.tok = 0, !.left = 0]

\* The fence node n grants next.
NextFence(n) ==
    IF FenceRule = "clock" THEN Max2(store[n].ctr + 1, Clock(n)) ELSE store[n].ctr + 1

Acquire(c) ==
    /\ Running(c) /\ pc[c] = "idle"
    /\ \E n \in Reach :
         /\ store[n].owner = None
         /\ lastAt[n] < now
         /\ NextFence(n) <= MaxToken
         /\ LET f == NextFence(n) IN
              /\ store' = [store EXCEPT ![n] = [owner |-> c, tok |-> f, left |-> TTL, ctr |-> f]]
              /\ lastAt' = [lastAt EXCEPT ![n] = now]
              /\ tok' = [tok EXCEPT ![c] = f]
              /\ fences' = fences \cup {<<f, c>>}
              /\ lastFence' = f
    /\ pc' = [pc EXCEPT ![c] = "holding"]
    /\ granted' = [granted EXCEPT ![c] = TTL]
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<now, prim, old, since, failovers, pending, paused, resVars>>

Owns(n, c) == store[n].owner = c /\ store[n].tok = tok[c]

\* The watchdog extends the lease if the node it reaches still has it; if
\* not the client learns it lost the lock.
Renew(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c] /\ granted[c] > 0
    /\ \E n \in Reach :
         IF Owns(n, c)
         THEN /\ store' = [store EXCEPT ![n].left = TTL]
              /\ granted' = [granted EXCEPT ![c] = TTL]
              /\ UNCHANGED <<pc, tok, wrote>>
         ELSE /\ pc' = [pc EXCEPT ![c] = "idle"]
              /\ tok' = [tok EXCEPT ![c] = 0]
              /\ wrote' = [wrote EXCEPT ![c] = FALSE]
              /\ UNCHANGED <<store, granted>>
    /\ UNCHANGED <<now, lastAt, prim, old, since, failovers, pending, paused, resVars, ghostVars>>

\* The client checks its own timer and decides to write (one write per
\* lease).  A write stands for any fenced operation: the resource applies
\* the same rule to reads (a read raises the fence too).
StartWrite(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c] /\ ~wrote[c]
    /\ granted[c] > 0
    /\ pending' = [pending EXCEPT ![c] = TRUE]
    /\ wrote' = [wrote EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<now, lockVars, pc, tok, paused, granted, resVars, ghostVars>>

\* The write reaches the resource, which applies FencingRule.
DeliverWrite(c) ==
    /\ Running(c) /\ pending[c]
    /\ pending' = [pending EXCEPT ![c] = FALSE]
    /\ IF Accepts(Fencing, TieBreak, tok[c], c, maxTok, maxOwner)
         THEN /\ maxTok' = IF tok[c] > maxTok THEN tok[c] ELSE maxTok
              /\ maxOwner' = IF tok[c] >= maxTok THEN c ELSE maxOwner
              /\ lastTok' = tok[c]
              /\ accepted' = accepted \cup {<<tok[c], c>>}
         ELSE UNCHANGED resVars
    /\ UNCHANGED <<now, lockVars, pc, tok, paused, wrote, granted, ghostVars>>

\* Release deletes the key only if this client (and token) still owns it
\* on the node it reaches.  A client that reaches no node gives up the
\* lease on its side (the key expires).
Release(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c]
    /\ pc' = [pc EXCEPT ![c] = "idle"]
    /\ \/ \E n \in Reach :
            IF Owns(n, c)
            THEN /\ store' = [store EXCEPT ![n].owner = None, ![n].tok = 0, ![n].left = 0]
                 /\ granted' = [granted EXCEPT ![c] = 0]
            ELSE UNCHANGED <<store, granted>>
       \/ Reach = {} /\ UNCHANGED <<store, granted>>
    /\ tok' = [tok EXCEPT ![c] = 0]      \* forgotten: keeps the state space small
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<now, lastAt, prim, old, since, failovers, pending, paused, resVars, ghostVars>>

\* A pause matters between the check and the write; pausing a client at
\* other times only delays it (its watchdog stops and the lease runs out,
\* which its own timer sees before it next writes).
Pause(c) ==
    /\ Pauses /\ Running(c) /\ pending[c]
    /\ paused' = [paused EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<now, lockVars, pc, tok, pending, wrote, granted, resVars, ghostVars>>

Resume(c) ==
    /\ paused[c]
    /\ paused' = [paused EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<now, lockVars, pc, tok, pending, wrote, granted, resVars, ghostVars>>

\* A crashed client stops for good; its in-flight write is lost with it.
Crash(c) ==
    /\ Crashes /\ pc[c] # "crashed"
    /\ pc' = [pc EXCEPT ![c] = "crashed"]
    /\ pending' = [pending EXCEPT ![c] = FALSE]
    /\ paused' = [paused EXCEPT ![c] = FALSE]
    /\ tok' = [tok EXCEPT ![c] = 0]
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<now, lockVars, granted, resVars, ghostVars>>

\* One tick for everybody.  A running client with a write in flight
\* delivers it before its lease ends: time waits for it (the timing
\* assumption).  A paused client gets no such promise.
Tick ==
    /\ \A c \in Clients : (pending[c] /\ Running(c)) => granted[c] > 1
    /\ now' = IF now < MaxTime THEN now + 1 ELSE now
    /\ store' = [n \in Nodes |-> Dec(store[n])]
    \* down-after is measured by the clocks: it does not pass once they stop
    /\ since' = IF old # 0 /\ since < FailoverDelay /\ now < MaxTime THEN since + 1 ELSE since
    /\ granted' = [c \in Clients |-> IF granted[c] > 0 THEN granted[c] - 1 ELSE 0]
    /\ UNCHANGED <<lastAt, prim, old, failovers, pc, tok, pending, paused, wrote, resVars, ghostVars>>

\* The replica catches up with the master (not while the master is isolated).
Replicate ==
    /\ old = 0
    /\ store[Other(prim)] # store[prim]
    /\ store' = [store EXCEPT ![Other(prim)] = store[prim]]
    /\ UNCHANGED <<now, lastAt, prim, old, since, failovers, clientVars, resVars, ghostVars>>

\* The master is cut off from the Sentinels and the replica.
Isolate ==
    /\ Failover /\ old = 0 /\ failovers < MaxFailovers
    /\ old' = prim /\ since' = 0
    /\ UNCHANGED <<now, store, lastAt, prim, failovers, clientVars, resVars, ghostVars>>

\* Sentinel promotes the replica after down-after: whatever it had not
\* received is lost.
Promote ==
    /\ old # 0 /\ prim = old /\ since >= FailoverDelay
    /\ prim' = Other(old)
    /\ failovers' = failovers + 1
    /\ UNCHANGED <<now, store, lastAt, old, since, clientVars, resVars, ghostVars>>

\* The isolation ends.  A demoted old master becomes a replica of the new
\* one and drops what it did meanwhile; an isolation shorter than
\* down-after ends with no failover.
Heal ==
    /\ old # 0
    /\ old' = 0
    /\ store' = [store EXCEPT ![old] = store[prim]]
    /\ UNCHANGED <<now, lastAt, prim, since, failovers, clientVars, resVars, ghostVars>>

Next ==
    \/ \E c \in Clients :
         \/ Acquire(c) \/ Renew(c) \/ StartWrite(c) \/ DeliverWrite(c)
         \/ Release(c) \/ Pause(c) \/ Resume(c) \/ Crash(c)
    \/ Tick \/ Replicate \/ Isolate \/ Promote \/ Heal

Fairness ==
    /\ SF_vars(Tick)
    /\ WF_vars(Promote) /\ WF_vars(Heal)
    /\ \A c \in Clients : WF_vars(DeliverWrite(c)) /\ WF_vars(Resume(c))

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Fencing safety (G2): what the resource accepted.                        *)

\* Accepted tokens never decrease: no accepted token is above the last one.
TokensNeverDecrease == \A p \in accepted : p[1] <= lastTok

\* No two owners write under one token.
OneOwnerPerToken == \A p, q \in accepted : p[1] = q[1] => p[2] = q[2]

FencingSafety == TokensNeverDecrease /\ OneOwnerPerToken

(* The fences the lock grants.                                            *)

\* Every grant's fence is above every earlier grant's (any node's).  Holds
\* with FenceRule "clock" when the clocks agree within the failover time
\* (Skew < FailoverDelay) and no old master grants after the promotion.
\* Breaks with "counter" (the lost counter is reissued), with a skew
\* beyond the failover time (the new master's clock is below the lost
\* fence), and under split brain (two masters grant side by side).
FencesIncrease == \A p \in fences : p[1] <= lastFence

\* No fence is granted to two clients.
FencesUnique == \A p, q \in fences : p[1] = q[1] => p[2] = q[2]

(* Mutual exclusion, two readings.                                          *)

\* Server view (G1): at most one client holds a lease that is valid by the
\* true clock, counting every lease any master granted and did not see
\* released.  Holds under pauses; breaks when failover loses a grant.
LeaseExclusion ==
    \A c, d \in Clients : c # d => ~(granted[c] > 0 /\ granted[d] > 0)

\* Client view: at most one client believes it holds the lock and acts on
\* it (has a write in flight).  Breaks under pauses: that is why G1 alone
\* does not protect data.
HolderExclusion ==
    \A c, d \in Clients : c # d => ~(pending[c] /\ pending[d])

(* Liveness (G3).                                                          *)

\* A lock whose holder crashed becomes acquirable again.
CrashedHolderFreed ==
    \A c \in Clients : (pc[c] = "crashed" /\ store[prim].owner = c) ~> (store[prim].owner # c)

\* Symmetry for the safety-only configs (not sound with liveness).
Perms == Permutations(Clients)
=============================================================================
