----------------------------- MODULE FencedLock -----------------------------
(***************************************************************************)
(* lockproof's fenced Redis lease lock, with the faults the chaos harness *)
(* injects.                                                                *)
(*                                                                         *)
(*  - A lock server (the Redis master) keeps one lock key (owner, token,   *)
(*    ticks left) and a fencing counter.  Acquire is one atomic script:    *)
(*    if the key is free, INCR the counter and set the key with a TTL.     *)
(*  - Time is a discrete clock: Tick makes one tick pass for everybody.    *)
(*    Leases are countdowns, so the state space is finite without a clock *)
(*    bound; a key whose countdown reaches 0 is deleted (expired).         *)
(*  - Asynchronous replication: the replica holds a copy of the key and    *)
(*    the counter that may lag the master; Failover promotes the replica,  *)
(*    losing the writes it had not received (a grant and its INCR).        *)
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
    MaxToken,      \* bound on fencing tokens (keeps the model finite)
    MaxFailovers,  \* bound on failovers
    Pauses,        \* BOOLEAN: clients may be paused (pause-client)
    Failover,      \* BOOLEAN: the replica may be promoted (failover)
    Crashes,       \* BOOLEAN: clients may crash (crash-client)
    Fencing,       \* BOOLEAN: the resource checks tokens at all
    TieBreak       \* BOOLEAN: on an equal token the resource checks the owner

ASSUME TTL \in Nat \ {0} /\ MaxToken \in Nat /\ MaxFailovers \in Nat
ASSUME None \notin Clients
ASSUME \A b \in {Pauses, Failover, Crashes, Fencing, TieBreak} : b \in BOOLEAN

VARIABLES
    master,    \* lock key and counter on the master: [owner, tok, left, ctr]
    replica,   \* the same on the replica, possibly lagging
    failovers, \* failovers so far
    pc,        \* client state: "idle", "holding" or "crashed"
    tok,       \* the token a client got with its lease
    pending,   \* TRUE: the client decided to write and the write is in flight
    paused,    \* TRUE: the client is stopped (takes no steps)
    wrote,     \* TRUE: the client already wrote under its current lease
    granted,   \* ticks left of the lease c was granted, by the true clock; it
               \* is also c's own timer (no clock skew in this model)
    maxTok,    \* resource: highest accepted token
    maxOwner,  \* resource: the client that wrote with maxTok
    lastTok,   \* ghost: token of the last accepted write
    accepted   \* ghost: set of <<token, client>> of accepted writes

lockVars == <<master, replica, failovers>>
clientVars == <<pc, tok, pending, paused, wrote, granted>>
resVars == <<maxTok, maxOwner, lastTok, accepted>>
vars == <<lockVars, clientVars, resVars>>

Store == [owner : Clients \cup {None}, tok : 0..MaxToken, left : 0..TTL, ctr : 0..MaxToken]

TypeOK ==
    /\ master \in Store /\ replica \in Store
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

Init ==
    /\ master = [owner |-> None, tok |-> 0, left |-> 0, ctr |-> 0]
    /\ replica = master
    /\ failovers = 0
    /\ pc = [c \in Clients |-> "idle"]
    /\ tok = [c \in Clients |-> 0]
    /\ pending = [c \in Clients |-> FALSE]
    /\ paused = [c \in Clients |-> FALSE]
    /\ wrote = [c \in Clients |-> FALSE]
    /\ granted = [c \in Clients |-> 0]
    /\ maxTok = 0 /\ maxOwner = None /\ lastTok = 0 /\ accepted = {}

\* A running client: not crashed, not paused.
Running(c) == pc[c] # "crashed" /\ ~paused[c]

\* The key after one tick: the countdown goes down; at 0 Redis deletes it.
Dec(s) == IF s.left > 1 THEN [s EXCEPT !.left = @ - 1]
          ELSE [s EXCEPT !.owner = None, !.tok = 0, !.left = 0]

Acquire(c) ==
    /\ Running(c) /\ pc[c] = "idle"
    /\ master.owner = None
    /\ master.ctr < MaxToken
    /\ LET t == master.ctr + 1 IN
         /\ master' = [owner |-> c, tok |-> t, left |-> TTL, ctr |-> t]
         /\ tok' = [tok EXCEPT ![c] = t]
    /\ pc' = [pc EXCEPT ![c] = "holding"]
    /\ granted' = [granted EXCEPT ![c] = TTL]
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<replica, failovers, pending, paused, resVars>>

\* The watchdog extends the lease if the server still has it; if not the
\* client learns it lost the lock.
Renew(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c] /\ granted[c] > 0
    /\ IF master.owner = c /\ master.tok = tok[c]
         THEN /\ master' = [master EXCEPT !.left = TTL]
              /\ granted' = [granted EXCEPT ![c] = TTL]
              /\ UNCHANGED pc
         ELSE /\ pc' = [pc EXCEPT ![c] = "idle"]
              /\ UNCHANGED <<master, granted>>
    /\ tok' = IF pc'[c] = "idle" THEN [tok EXCEPT ![c] = 0] ELSE tok
    /\ wrote' = IF pc'[c] = "idle" THEN [wrote EXCEPT ![c] = FALSE] ELSE wrote
    /\ UNCHANGED <<replica, failovers, pending, paused, resVars>>

\* The client checks its own timer and decides to write (one write per lease).
StartWrite(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c] /\ ~wrote[c]
    /\ granted[c] > 0
    /\ pending' = [pending EXCEPT ![c] = TRUE]
    /\ wrote' = [wrote EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<lockVars, pc, tok, paused, granted, resVars>>

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
    /\ UNCHANGED <<lockVars, pc, tok, paused, wrote, granted>>

\* Release deletes the key only if this client (and token) still owns it.
Release(c) ==
    /\ Running(c) /\ pc[c] = "holding" /\ ~pending[c]
    /\ pc' = [pc EXCEPT ![c] = "idle"]
    /\ IF master.owner = c /\ master.tok = tok[c]
         THEN /\ master' = [master EXCEPT !.owner = None, !.tok = 0, !.left = 0]
              /\ granted' = [granted EXCEPT ![c] = 0]
         ELSE UNCHANGED <<master, granted>>
    /\ tok' = [tok EXCEPT ![c] = 0]      \* forgotten: keeps the state space small
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<replica, failovers, pending, paused, resVars>>

\* A pause matters between the check and the write; pausing a client at
\* other times only delays it (its watchdog stops and the lease runs out,
\* which its own timer sees before it next writes).
Pause(c) ==
    /\ Pauses /\ Running(c) /\ pending[c]
    /\ paused' = [paused EXCEPT ![c] = TRUE]
    /\ UNCHANGED <<lockVars, pc, tok, pending, wrote, granted, resVars>>

Resume(c) ==
    /\ paused[c]
    /\ paused' = [paused EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<lockVars, pc, tok, pending, wrote, granted, resVars>>

\* A crashed client stops for good; its in-flight write is lost with it.
Crash(c) ==
    /\ Crashes /\ pc[c] # "crashed"
    /\ pc' = [pc EXCEPT ![c] = "crashed"]
    /\ pending' = [pending EXCEPT ![c] = FALSE]
    /\ paused' = [paused EXCEPT ![c] = FALSE]
    /\ tok' = [tok EXCEPT ![c] = 0]
    /\ wrote' = [wrote EXCEPT ![c] = FALSE]
    /\ UNCHANGED <<lockVars, granted, resVars>>

\* One tick for everybody.  A running client with a write in flight
\* delivers it before its lease ends: time waits for it (the timing
\* assumption).  A paused client gets no such promise.
Tick ==
    /\ \A c \in Clients : (pending[c] /\ Running(c)) => granted[c] > 1
    /\ master' = Dec(master)
    /\ replica' = Dec(replica)
    /\ granted' = [c \in Clients |-> IF granted[c] > 0 THEN granted[c] - 1 ELSE 0]
    /\ UNCHANGED <<failovers, pc, tok, pending, paused, wrote, resVars>>

Replicate ==
    /\ replica # master
    /\ replica' = master
    /\ UNCHANGED <<master, failovers, clientVars, resVars>>

\* Sentinel promotes the replica: whatever it had not received is lost.
Promote ==
    /\ Failover /\ failovers < MaxFailovers
    /\ master' = replica
    /\ failovers' = failovers + 1
    /\ UNCHANGED <<replica, clientVars, resVars>>

Next ==
    \/ \E c \in Clients :
         \/ Acquire(c) \/ Renew(c) \/ StartWrite(c) \/ DeliverWrite(c)
         \/ Release(c) \/ Pause(c) \/ Resume(c) \/ Crash(c)
    \/ Tick \/ Replicate \/ Promote

Fairness ==
    /\ SF_vars(Tick)
    /\ \A c \in Clients : WF_vars(DeliverWrite(c)) /\ WF_vars(Resume(c))

Spec == Init /\ [][Next]_vars /\ Fairness

-----------------------------------------------------------------------------
(* Fencing safety (G2): what the resource accepted.                        *)

\* Accepted tokens never decrease: no accepted token is above the last one.
TokensNeverDecrease == \A p \in accepted : p[1] <= lastTok

\* No two owners write under one token.
OneOwnerPerToken == \A p, q \in accepted : p[1] = q[1] => p[2] = q[2]

FencingSafety == TokensNeverDecrease /\ OneOwnerPerToken

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
    \A c \in Clients : (pc[c] = "crashed" /\ master.owner = c) ~> (master.owner = None)

\* Symmetry for the safety-only configs (not sound with liveness).
Perms == Permutations(Clients)
=============================================================================
