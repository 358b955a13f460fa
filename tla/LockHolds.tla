------------------------------ MODULE LockHolds ------------------------------
(***************************************************************************)
(* The whole lock on one master, redesigned around hold identity (issue   *)
(* 60, /work/design-holds.md): one model where the holds, the line, the   *)
(* hand-off and every request a client sends, its cleanup's included,     *)
(* meet.  Design selects the scripts and the client:                      *)
(*   "new"  every hold is a record of its own, h.<id>, named by the id of *)
(*          the call (attempt) that made it; release, undo, the          *)
(*          ReplicaAcks give-back, a waiter's leave and the cleanup of a  *)
(*          lost acquire are one script, end(id, fence|"", place, bury), *)
(*          a no-op when the record is absent; buried ids expire one by   *)
(*          one; a hand-off starts the next holder's records afresh;      *)
(*          Release is single-flight per lease; TTLLeft and Renew answer  *)
(*          from the lease's own record; a wait served after Close gives  *)
(*          the hold back.                                                *)
(*   "old"  the scripts and the client at deebaa1: nested holds share the *)
(*          owner token and fence, counted in n, their ids in r (the      *)
(*          newest RCap of them), metadata in m.<id> fields, buried ids   *)
(*          in a hash gone that lives an hour past its last entry;       *)
(*          release, undo, leave, relany (releaseBestEffort: no fence, no *)
(*          id) and bury are scripts of their own.                        *)
(*                                                                         *)
(* The network is a bag: a request is delivered at any time, in any       *)
(* order, also after its sender gave up (a request dropped is one never   *)
(* delivered: the safety invariants cover it, and NoOrphanHold is stated  *)
(* only once nothing is in transit); a reply is heard or lost.  A request *)
(* is duplicated where the client sends it again while a copy may still   *)
(* be in transit: a cleanup's resends, a second concurrent Release (old), *)
(* Release again after an unknown outcome; at most MaxDup copies of one   *)
(* request are in transit.  TCP never duplicates a request by itself.     *)
(*                                                                         *)
(* Ops selects the behaviours a config lets happen (a must-fail config    *)
(* enables the few its defect needs, so that TLC stops in seconds):       *)
(*   "lose"    replies are lost, calls give up with their outcome unknown *)
(*             and clean up (and the retriers retry with a new id)        *)
(*   "twice"   a second Release of one lease while the first is in flight *)
(*             (old only: the new Release is single-flight)               *)
(*   "again"   Release called again after ErrUnknownOutcome               *)
(*   "acks"    ReplicaAcks: a grant with too few replica acks is given    *)
(*             back                                                       *)
(*   "expire"  a hash nobody believes it holds runs out of TTL (a lease's *)
(*             validity ends before its key's: the clock assumption)      *)
(*   "close"   the owner's client is closed (Client.Close)                *)
(*   "crash"   a waiting call dies; its place is dropped (dropDead) and a *)
(*             hand-off to it runs out                                    *)
(*   "goneexp" a buried id's hour passes once no request of it is left   *)
(*   "dupacq"  an acquire request is sent twice (the network duplicates   *)
(*             it): not something the client or TCP does, but the one     *)
(*             duplication the new design does not survive: a copy that   *)
(*             lands after its hold ended takes a hold nobody has, its id *)
(*             not buried by the release (LockHolds_dupacq_unsafe)        *)
(*                                                                         *)
(* Not here: time beyond the expiries above (renewals extend nothing      *)
(* here: Renew and TTLLeft are their answers, AnswersOwnHold), the fence  *)
(* across a failover (FencedLock), pub/sub (a waiter asks again whenever  *)
(* it likes), force-unlock (an operator's override: it ends holds whose   *)
(* leases still believe them, so G1 is stated without it), metadata       *)
(* values (every acquire carries some: what counts is whose field stays). *)
(*                                                                         *)
(* A call's life (pc):                                                     *)
(*   idle -> acq -> held | queued (mode w) | done (refused)               *)
(*   queued -> acq (asks again) | gave up: lv (old leave) or cu | dead    *)
(*   held -> rel -> rdone (reply) | cleanup (reply lost)                  *)
(*   acq -> cleanup (reply lost); retriers: acq -> rb -> acq (new id)     *)
(*   cleanup: old cb (bury) -> cu (undo / relany, + leave) -> done;       *)
(*            new cu (end, resent until it answers) -> done               *)
(* A call believes it holds the lock only in held.                        *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Design,      \* "new" or "old"
    Ops,         \* the behaviours enabled, see above
    Owner,       \* the WithOwner token the owner's calls share
    OwnerCalls,  \* the owner's calls (WithOwner acquires: reentrant)
    Reenterers,  \* those of OwnerCalls that are Lease.Reenter of a held call
    FreshCalls,  \* calls of fresh tokens, each its own token
    Waiters,     \* the calls that wait in line (mode w); the rest try once
    Retriers,    \* the fresh calls with WithRetry (a second attempt, new id)
    RCap,        \* old: how many ids r keeps (holdIDs, 16)
    MaxGrants,   \* bound on the fences issued
    MaxDup       \* bound on the copies of one request in transit

None == "none"
Calls == OwnerCalls \cup FreshCalls
Tokens == {Owner} \cup FreshCalls
New == Design = "new"

ASSUME Design \in {"new", "old"}
ASSUME Ops \subseteq {"lose", "twice", "again", "acks", "expire", "close", "crash", "goneexp", "dupacq"}
ASSUME OwnerCalls \cap FreshCalls = {} /\ Owner \notin Calls
ASSUME Reenterers \subseteq OwnerCalls /\ Waiters \subseteq Calls /\ Retriers \subseteq FreshCalls
ASSUME Retriers \cap Waiters = {}
ASSUME RCap \in Nat \ {0} /\ MaxGrants \in Nat \ {0} /\ MaxDup \in Nat \ {0}

Tok(x) == IF x \in OwnerCalls THEN Owner ELSE x
MaxAtt(x) == IF x \in Retriers THEN 2 ELSE 1
Ids == {<<x, k>> : x \in Calls, k \in 1..2}

VARIABLES
    \* the lock's keys
    o,       \* the hash's o (None: no hash)
    f,       \* the fence counter; the hash's f while it exists
    n,       \* old: its n; new: the number of records (Len(r))
    r,       \* new: the h.<id> records; old: r, the newest RCap hold ids
    meta,    \* old: the ids with an m.<id> field (new: inside h.<id>)
    p,       \* the call a hand-off not picked up went to (None: none)
    w,       \* the wait flag
    line,    \* the queue by call, in arrival order
    gone,    \* the buried ids
    stale,   \* old: buried ids past their hour, kept since the hash's TTL
             \* follows the newest bury
    \* the network and the calls
    net,     \* the requests in transit: <<request, copy>>
    pc,      \* per call, see above
    lf,      \* per call: the fence its lease got (0: none)
    att,     \* per call: its attempt (the id is <<call, attempt>>)
    yo,      \* per call: the held call a Reenter is of
    why,     \* per call: what its cleanup cleans up ("acq", "rel", "gb")
    unk,     \* the calls whose Release had an unknown outcome
    again,   \* the calls that used their one extra Release
    closed,  \* the owner's client is closed
    cg,      \* a grant kept by a call of the closed client
    lapsed   \* the last free came by expiry (none since a grant)

srv == <<o, f, n, r, meta, p, w, line, gone, stale, lapsed>>
cli == <<pc, lf, att, yo, why, unk, again, closed, cg>>
vars == <<srv, net, cli>>

Id(x) == <<x, att[x]>>
Range(s) == {s[i] : i \in 1..Len(s)}
InR(id) == \E i \in 1..Len(r) : r[i] = id
Without(s, e) == SelectSeq(s, LAMBDA v : v # e)
Join(l, x) == IF x \in Range(l) THEN l ELSE Append(l, x)

\* A request: t its script, x its call, k the attempt, fl its fence (0:
\* none), y the held call of a Reenter.
Req(t, x, k, fl, y) == [t |-> t, x |-> x, k |-> k, fl |-> fl, y |-> y]
M(t, x) == Req(t, x, att[x], 0, x)
MF(t, x) == Req(t, x, att[x], lf[x], x)
Copies(m) == {c \in 1..MaxDup : <<m, c>> \in net}
InNet(m) == Copies(m) # {}
\* Send request m (one more copy, if the bound allows).
Send(nt, m) == IF \E c \in 1..MaxDup : <<m, c>> \notin nt
               THEN nt \cup {<<m, CHOOSE c \in 1..MaxDup : <<m, c>> \notin nt>>}
               ELSE nt

-----------------------------------------------------------------------------
(* The scripts, one atomic step each.  Each defines the primed lock keys  *)
(* but gone and stale (Script below), and res, the reply.                  *)

\* The lock freed, nobody to hand it to: DEL (every field goes).
Del(l) == o' = None /\ n' = 0 /\ r' = <<>> /\ meta' = {} /\ p' = None
          /\ w' = FALSE /\ line' = l /\ UNCHANGED f

\* handoff: a provisional hold for the head call c of l (fence, p = c,
\* published).  New: DEL then a fresh HSET, the record h.<c> its only
\* one.  Old: HSET over the hash: r emptied, the m.<id> fields stay.
HandOff(l) ==
    LET c == Head(l) IN
    /\ f < MaxGrants /\ f' = f + 1
    /\ o' = Tok(c) /\ n' = 1 /\ p' = c /\ line' = Tail(l) /\ w' = (Tail(l) # <<>>)
    /\ r' = IF New THEN <<Id(c)>> ELSE <<>>
    /\ meta' = IF New THEN {} ELSE meta
    /\ lapsed' = FALSE

\* The last hold ends with l left in line: handed to the head, or DEL
\* (with w unset, the script does not look at the queue).
Freed(l, usew) == IF l = <<>> \/ (usew /\ ~w) THEN Del(l) /\ UNCHANGED lapsed ELSE HandOff(l)

\* grant to call x (a free lock, x first in line or nobody in line).
Grant(x, id, l) ==
    /\ f < MaxGrants /\ f' = f + 1
    /\ o' = Tok(x) /\ n' = 1 /\ p' = None /\ r' = <<id>> /\ line' = l
    /\ meta' = IF New THEN {} ELSE {id}
    /\ w' = (l # <<>>) /\ lapsed' = FALSE

\* old addHold and setMeta: id joins r (the oldest pushed out past RCap,
\* its m.<id> with it), and gets its m.<id>.
AddHoldOld(id) ==
    LET r2 == Append(r, id) IN
    IF Len(r2) > RCap THEN r' = Tail(r2) /\ meta' = (meta \ {Head(r2)}) \cup {id}
    ELSE r' = r2 /\ meta' = meta \cup {id}
\* old dropHold: id leaves r, its m.<id> goes.
DropHoldOld(id) == r' = Without(r, id) /\ meta' = meta \ {id}

\* The caller is refused: a waiting call joins the line (w set: the lock
\* is held, or was just handed); a try fails.
Refused(x, l, res) ==
    IF x \in Waiters THEN line' = Join(l, x) /\ w' = TRUE /\ res = "q"
    ELSE line' = l /\ UNCHANGED w /\ res = "no"

\* acquire of call x, attempt id (new design).
AcquireNew(x, id, res) ==
    IF id \in gone THEN res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>
    ELSE IF o = Tok(x) /\ InR(id)
    THEN \* this call holds: the pickup of its hand-off, or a repeat
         /\ res = "ok"
         /\ p' = IF p = x THEN None ELSE p
         /\ line' = Without(line, x)
         /\ UNCHANGED <<o, f, n, r, meta, w, lapsed>>
    ELSE IF o = Tok(x) /\ p = None /\ x \in OwnerCalls
    THEN \* reentrant: a nested hold of its own
         /\ res = "ok" /\ r' = Append(r, id) /\ n' = n + 1
         /\ line' = Without(line, x)
         /\ UNCHANGED <<o, f, meta, p, w, lapsed>>
    ELSE IF o # None
    THEN \* taken: by another token, or by a hand-off not yet picked up
         Refused(x, line, res) /\ UNCHANGED <<o, f, n, r, meta, p, lapsed>>
    ELSE IF line = <<>> \/ Head(line) = x
    THEN res = "ok" /\ Grant(x, id, Without(line, x))
    ELSE \* free, others first: the head is handed the lock
         /\ HandOff(line)
         /\ IF x \in Waiters THEN line' = Join(Tail(line), x) /\ w' = TRUE /\ res = "q"
            ELSE res = "no"

\* acquireScript of deebaa1.
AcquireOld(x, id, res) ==
    IF id \in gone THEN res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>
    ELSE IF o = Tok(x) /\ (p = None \/ p = x)
    THEN /\ res = "ok"
         /\ p' = None
         /\ line' = IF x \in Waiters THEN Without(line, x) ELSE line
         /\ n' = IF p = None /\ x \in OwnerCalls THEN n + 1 ELSE n
         /\ AddHoldOld(id)
         /\ UNCHANGED <<o, f, w, lapsed>>
    ELSE IF o # None
    THEN Refused(x, line, res) /\ UNCHANGED <<o, f, n, r, meta, p, lapsed>>
    ELSE IF line = <<>> \/ Head(line) = x
    THEN res = "ok" /\ Grant(x, id, Without(line, x))
    ELSE /\ HandOff(line)
         /\ IF x \in Waiters THEN line' = Join(Tail(line), x) /\ w' = TRUE /\ res = "q"
            ELSE res = "no"

\* new reenterScript: a nested hold only while the outer record (call y)
\* stands under its token and fence, and no hand-off is pending; a repeat
\* of a reentry that took adds nothing.
ReenterNew(x, id, y, fl, res) ==
    IF id \notin gone /\ o = Tok(x) /\ f = fl /\ InR(Id(y)) /\ p = None
    THEN /\ res = "ok"
         /\ r' = (IF InR(id) THEN r ELSE Append(r, id))
         /\ n' = (IF InR(id) THEN n ELSE n + 1)
         /\ UNCHANGED <<o, f, meta, p, w, line, lapsed>>
    ELSE res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>

\* old reenterScript: the token under that fence, no p.
ReenterOld(x, id, fl, res) ==
    IF id \notin gone /\ o = Tok(x) /\ f = fl /\ p = None
    THEN res = "ok" /\ n' = n + 1 /\ AddHoldOld(id)
         /\ UNCHANGED <<o, f, p, w, line, lapsed>>
    ELSE res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>

\* new endScript(tok, id, fence|"", bury, place) (bury is applied in
\* Script): the place goes; the record, if it stands under tok (and
\* fence), goes; the last one frees the lock.  Its fast path (a release:
\* no bury, no place) skips the queue when w is unset; the slow path
\* hands off whenever somebody is in line.
EndNew(x, id, fl, place, res) ==
    LET l == IF place THEN Without(line, x) ELSE line IN
    IF o = Tok(x) /\ InR(id) /\ (fl = 0 \/ fl = f)
    THEN /\ res = "ok"
         /\ IF n > 1 THEN r' = Without(r, id) /\ n' = n - 1 /\ line' = l
                          /\ UNCHANGED <<o, f, meta, p, w, lapsed>>
            ELSE Freed(l, ~place)
    ELSE res = "no" /\ line' = l /\ UNCHANGED <<o, f, n, r, meta, p, w, lapsed>>

\* old releaseScript (fence fl, id; relany: fence "" and id "").
ReleaseOld(x, id, fl, any, res) ==
    IF o # Tok(x) \/ (~any /\ f # fl) \/ (~any /\ ~InR(id) /\ id \in gone)
    THEN res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>
    ELSE /\ res = "ok"
         /\ IF n > 1 THEN /\ n' = n - 1
                          /\ IF any THEN UNCHANGED <<r, meta>> ELSE DropHoldOld(id)
                          /\ UNCHANGED <<o, f, p, w, line, lapsed>>
            ELSE Freed(line, TRUE)

\* old undoScript: the hold id added, if its id is in r.
UndoOld(x, id, res) ==
    IF o # Tok(x) \/ ~InR(id)
    THEN res = "no" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>
    ELSE /\ res = "ok"
         /\ IF n > 1 THEN n' = n - 1 /\ DropHoldOld(id) /\ UNCHANGED <<o, f, p, w, line, lapsed>>
            ELSE Freed(line, FALSE)

\* old leaveScript (cl: sent by the cleanup): the place goes; a leave of
\* the call itself whose id is buried passes nothing on; else a hand-off
\* to the call not picked up (a fresh token's hold, or p = x) is passed on.
LeaveOld(x, id, cl, res) ==
    LET l == Without(line, x) IN
    /\ res = "ok"
    /\ IF (cl \/ id \notin gone) /\ o = Tok(x) /\ (x \in FreshCalls \/ p = x)
       THEN Freed(l, FALSE)
       ELSE line' = l /\ UNCHANGED <<o, f, n, r, meta, p, w, lapsed>>

\* Redis runs request m; res is its reply.
Script(m, res) ==
    LET x == m.x
        id == <<m.x, m.k>>
        bury == m.t \in {"bury", "endbp"}
    IN
    /\ IF bury
       THEN gone' = gone \cup {id} /\ stale' = stale \ {id}
       ELSE UNCHANGED <<gone, stale>>
    /\ CASE m.t = "acq"     -> IF New THEN AcquireNew(x, id, res) ELSE AcquireOld(x, id, res)
         [] m.t = "reenter" -> IF New THEN ReenterNew(x, id, m.y, m.fl, res)
                               ELSE ReenterOld(x, id, m.fl, res)
         [] m.t = "end"     -> EndNew(x, id, m.fl, FALSE, res)
         [] m.t = "endbp"   -> EndNew(x, id, 0, TRUE, res)
         [] m.t = "rel"     -> ReleaseOld(x, id, m.fl, FALSE, res)
         [] m.t = "relany"  -> ReleaseOld(x, id, 0, TRUE, res)
         [] m.t = "undo"    -> UndoOld(x, id, res)
         [] m.t = "leave"   -> LeaveOld(x, id, FALSE, res)
         [] m.t = "leavec"  -> LeaveOld(x, id, TRUE, res)
         [] m.t = "bury"    -> res = "ok" /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed>>

-----------------------------------------------------------------------------
(* The client.                                                             *)

\* What a cleanup sends to take back what the call may hold: new, one end
\* (the cleanup of an acquire also buries and leaves its place; of a
\* release or a give-back, the lease's end with its fence); old, an undo
\* for an owner's call or a release's cleanup (cleanupOf), relany for a
\* fresh token's acquire.
TakeBack(x) ==
    IF New THEN IF why[x] = "acq" THEN M("endbp", x) ELSE MF("end", x)
    ELSE IF x \in OwnerCalls \/ why[x] = "rel" THEN M("undo", x) ELSE M("relany", x)

\* The request call x waits on in pc (its reply moves it on).
Awaits(x) ==
    CASE pc[x] = "acq"  -> {IF x \in Reenterers THEN Req("reenter", x, att[x], lf[yo[x]], yo[x])
                            ELSE M("acq", x)}
      [] pc[x] = "rel"  -> {IF New THEN MF("end", x) ELSE MF("rel", x)}
      [] pc[x] = "cb"   -> {M("bury", x)}
      [] pc[x] = "cu"   -> {TakeBack(x)}
      [] pc[x] = "lv"   -> {M("leave", x)}
      [] pc[x] = "rb"   -> {IF New THEN M("endbp", x) ELSE M("bury", x)}
      [] OTHER          -> {}

\* The cleanup starts (Lease.cleanupOf, attempt.cleanup): old, bury first;
\* new, the end at once.
StartCleanup(x, wy, nt) ==
    /\ why' = [why EXCEPT ![x] = wy]
    /\ IF New
       THEN pc' = [pc EXCEPT ![x] = "cu"]
            /\ net' = Send(nt, IF wy = "acq" THEN M("endbp", x) ELSE MF("end", x))
       ELSE pc' = [pc EXCEPT ![x] = "cb"] /\ net' = Send(nt, M("bury", x))

Start(x) ==
    /\ pc[x] = "idle"
    /\ ~(closed /\ x \in OwnerCalls)
    /\ IF x \in Reenterers
       THEN \E y \in OwnerCalls \ Reenterers :
              /\ pc[y] = "held"
              /\ yo' = [yo EXCEPT ![x] = y]
              /\ net' = Send(net, Req("reenter", x, att[x], lf[y], y))
       ELSE net' = (IF "dupacq" \in Ops THEN Send(Send(net, M("acq", x)), M("acq", x))
                    ELSE Send(net, M("acq", x)))
            /\ UNCHANGED yo
    /\ pc' = [pc EXCEPT ![x] = "acq"]
    /\ UNCHANGED <<srv, lf, att, why, unk, again, closed, cg>>

\* A waiter asks again (notified, or polling), under the same id.
AskAgain(x) ==
    /\ pc[x] = "queued"
    /\ pc' = [pc EXCEPT ![x] = "acq"]
    /\ net' = Send(net, M("acq", x))
    /\ UNCHANGED <<srv, lf, att, yo, why, unk, again, closed, cg>>

\* A waiter gives up: old, its own leave (a lost reply of it starts the
\* cleanup); new, end(id, bury, place), resent until it answers.
GiveUpWait(x) ==
    /\ pc[x] = "queued"
    /\ IF New THEN StartCleanup(x, "acq", net)
       ELSE pc' = [pc EXCEPT ![x] = "lv"] /\ net' = Send(net, M("leave", x)) /\ UNCHANGED why
    /\ UNCHANGED <<srv, lf, att, yo, unk, again, closed, cg>>

Release(x) ==
    /\ pc[x] = "held"
    /\ pc' = [pc EXCEPT ![x] = "rel"]
    /\ net' = Send(net, IF New THEN MF("end", x) ELSE MF("rel", x))
    /\ UNCHANGED <<srv, lf, att, yo, why, unk, again, closed, cg>>

\* old: a second Release of the lease while the first is in flight sends
\* the same release again (both passed the "released" check).
ReleaseTwice(x) ==
    /\ "twice" \in Ops /\ ~New
    /\ pc[x] = "rel" /\ x \notin again
    /\ again' = again \cup {x}
    /\ net' = Send(net, MF("rel", x))
    /\ UNCHANGED <<srv, pc, lf, att, yo, why, unk, closed, cg>>

\* Release called again after ErrUnknownOutcome: old releaseAgain sends the
\* undo at once, whatever the background cleanup did; new, end(id) again.
ReleaseAgain(x) ==
    /\ "again" \in Ops
    /\ x \in unk /\ x \notin again /\ pc[x] \in {"cb", "cu", "done"}
    /\ again' = again \cup {x}
    /\ net' = Send(net, IF New THEN MF("end", x) ELSE M("undo", x))
    /\ UNCHANGED <<srv, pc, lf, att, yo, why, unk, closed, cg>>

\* The call's ctx ends before its reply came (lost, or the request still
\* in transit): the outcome is unknown; the request stays in the net.
GiveUp(x) ==
    /\ "lose" \in Ops
    /\ pc[x] \in {"acq", "rel", "lv", "rb"}
    /\ CASE pc[x] = "acq" /\ x \in Retriers /\ att[x] < MaxAtt(x) ->
              \* WithRetry: the lost attempt is buried (new: ended and
              \* buried) before the next one
              /\ pc' = [pc EXCEPT ![x] = "rb"]
              /\ net' = Send(net, IF New THEN M("endbp", x) ELSE M("bury", x))
              /\ UNCHANGED <<why, unk>>
         [] pc[x] = "rel" ->
              /\ unk' = unk \cup {x}
              /\ IF New THEN pc' = [pc EXCEPT ![x] = "cu"] /\ why' = [why EXCEPT ![x] = "rel"]
                             /\ UNCHANGED net
                 ELSE StartCleanup(x, "rel", net)
         [] OTHER -> StartCleanup(x, "acq", net) /\ UNCHANGED unk
    /\ UNCHANGED <<srv, lf, att, yo, again, closed, cg>>

\* A cleanup step whose reply did not come is sent again (a copy may
\* still be in transit: a duplicate).
Resend(x) ==
    /\ "lose" \in Ops
    /\ pc[x] \in {"cb", "cu"}
    /\ \E m \in Awaits(x) : Cardinality(Copies(m)) < MaxDup /\ net' = Send(net, m)
    /\ UNCHANGED <<srv, cli>>

\* The reply of an acquire that granted: a lease; but with too few replica
\* acks it is given back (old: relany, no fence, no id, nothing buried;
\* new: end(id)), and after Close a wait served gives it back (new) or
\* keeps it (old, without watchdog).
Granted(x, fl) ==
    \/ /\ ~(closed /\ x \in OwnerCalls /\ New)
       /\ pc' = [pc EXCEPT ![x] = "held"] /\ lf' = [lf EXCEPT ![x] = fl]
       /\ cg' = (cg \/ (closed /\ x \in OwnerCalls))
       /\ UNCHANGED <<why, att>>
    \/ /\ closed /\ x \in OwnerCalls /\ New
       /\ lf' = [lf EXCEPT ![x] = fl]
       /\ pc' = [pc EXCEPT ![x] = "cu"] /\ why' = [why EXCEPT ![x] = "gb"]
       /\ UNCHANGED <<cg, att>>
    \/ /\ "acks" \in Ops
       /\ pc' = [pc EXCEPT ![x] = "done"] /\ lf' = [lf EXCEPT ![x] = fl]
       /\ UNCHANGED <<why, cg, att>>

\* What is sent along with the step of Hear (the give-backs, the old
\* cleanup's second step).
HearSends(x, nt) ==
    CASE pc'[x] = "cu" /\ pc[x] = "cb" ->
           LET nt2 == Send(nt, TakeBack(x)) IN
           IF x \in Waiters /\ why[x] = "acq" THEN Send(nt2, M("leavec", x)) ELSE nt2
      [] pc'[x] = "cu" /\ pc[x] = "acq" -> Send(nt, Req("end", x, att[x], lf'[x], x))
      [] pc'[x] = "done" /\ pc[x] = "acq" /\ lf'[x] # 0 ->
           Send(nt, IF New THEN Req("end", x, att[x], lf'[x], x) ELSE M("relany", x))
      [] pc'[x] = "acq" /\ pc[x] = "rb" -> Send(nt, Req("acq", x, att'[x], 0, x))
      [] OTHER -> nt

\* The sender of m hears its reply res.
Hear(m, res, nt) ==
    LET x == m.x IN
    /\ CASE pc[x] = "acq" ->
              IF res = "ok" THEN Granted(x, f')
              ELSE /\ pc' = [pc EXCEPT ![x] = IF res = "q" THEN "queued" ELSE "done"]
                   /\ UNCHANGED <<lf, why, cg, att>>
         [] pc[x] = "cb" ->
              pc' = [pc EXCEPT ![x] = "cu"] /\ UNCHANGED <<lf, why, cg, att>>
         [] pc[x] = "rb" ->
              \* the next attempt, with a new id; or WithRetry gives up
              \* surely (RetryIf, a refused dial, ctx ended before sending)
              \/ pc' = [pc EXCEPT ![x] = "acq"] /\ att' = [att EXCEPT ![x] = att[x] + 1]
                 /\ UNCHANGED <<lf, why, cg>>
              \/ pc' = [pc EXCEPT ![x] = "done"] /\ UNCHANGED <<lf, why, cg, att>>
         [] pc[x] = "rel" ->
              pc' = [pc EXCEPT ![x] = "rdone"] /\ UNCHANGED <<lf, why, cg, att>>
         [] pc[x] \in {"cu", "lv"} ->
              pc' = [pc EXCEPT ![x] = "done"] /\ UNCHANGED <<lf, why, cg, att>>
    /\ net' = HearSends(x, nt)

Deliver(e) ==
    LET m == e[1] IN
    /\ e \in net
    /\ \E res \in {"ok", "no", "q"}, heard \in BOOLEAN :
         /\ Script(m, res)
         /\ heard \/ "lose" \in Ops
         /\ IF heard /\ m \in Awaits(m.x)
            THEN Hear(m, res, net \ {e})
            ELSE net' = net \ {e} /\ UNCHANGED <<pc, lf, att, why, cg>>
    /\ UNCHANGED <<yo, unk, again, closed>>

\* The owner's client is closed: it starts no call; its waits go on.
Close ==
    /\ "close" \in Ops /\ ~closed
    /\ closed' = TRUE
    /\ UNCHANGED <<srv, net, pc, lf, att, yo, why, unk, again, cg>>

\* A waiting call dies; its place's deadline passes (dropDead).
Crash(x) ==
    /\ "crash" \in Ops /\ pc[x] = "queued"
    /\ pc' = [pc EXCEPT ![x] = "dead"]
    /\ UNCHANGED <<srv, net, lf, att, yo, why, unk, again, closed, cg>>
DropDead(x) ==
    /\ pc[x] = "dead" /\ x \in Range(line)
    /\ line' = Without(line, x)
    /\ UNCHANGED <<o, f, n, r, meta, p, w, gone, stale, lapsed, net, cli>>

\* The hash runs out of TTL.  Each lease's validity ends before its key's
\* TTL (the clock assumption), so only a hash nobody believes it holds.
Believers(t) == {x \in Calls : pc[x] = "held" /\ Tok(x) = t}
Expire ==
    /\ "expire" \in Ops
    /\ o # None /\ Believers(o) = {}
    /\ Del(line) /\ lapsed' = TRUE
    /\ UNCHANGED <<gone, stale, net, cli>>

\* A buried id's hour passes: no request of it is left, and its call
\* sends none with it any more (the hour outlasts any request in transit).
\* New: trimmed on access (ZREMRANGEBYSCORE; an expired entry decides
\* nothing, so it goes at its expiry here).  Old: the hash lives an hour
\* past its newest entry: it goes when all are past theirs.
IdDone(id) ==
    /\ ~\E e \in net : <<e[1].x, e[1].k>> = id
    /\ id # Id(id[1]) \/ pc[id[1]] \in {"done", "rdone", "dead"}
    /\ id[1] \in unk => id[1] \in again \/ "again" \notin Ops
GoneExpires(id) ==
    /\ "goneexp" \in Ops
    /\ id \in gone \ stale /\ IdDone(id)
    /\ IF New THEN gone' = gone \ {id} /\ UNCHANGED stale
       ELSE IF stale \cup {id} = gone THEN gone' = {} /\ stale' = {}
       ELSE stale' = stale \cup {id} /\ UNCHANGED gone
    /\ UNCHANGED <<o, f, n, r, meta, p, w, line, lapsed, net, cli>>

Next ==
    \/ \E x \in Calls :
         \/ Start(x) \/ AskAgain(x) \/ GiveUpWait(x) \/ Release(x)
         \/ ReleaseTwice(x) \/ ReleaseAgain(x) \/ GiveUp(x) \/ Resend(x)
         \/ Crash(x) \/ DropDead(x)
    \/ \E e \in net : Deliver(e)
    \/ Close \/ Expire
    \/ \E id \in gone : GoneExpires(id)

Init ==
    /\ o = None /\ f = 0 /\ n = 0 /\ r = <<>> /\ meta = {} /\ p = None
    /\ w = FALSE /\ line = <<>> /\ gone = {} /\ stale = {} /\ lapsed = FALSE
    /\ net = {}
    /\ pc = [x \in Calls |-> "idle"] /\ lf = [x \in Calls |-> 0]
    /\ att = [x \in Calls |-> 1] /\ yo = [x \in Calls |-> x]
    /\ why = [x \in Calls |-> "acq"] /\ unk = {} /\ again = {}
    /\ closed = FALSE /\ cg = FALSE

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* What the lock promises.                                                 *)

TypeOK ==
    /\ o \in Tokens \cup {None} /\ f \in 0..MaxGrants
    /\ n \in 0..Cardinality(Ids) /\ r \in Seq(Ids) /\ meta \subseteq Ids
    /\ p \in Calls \cup {None} /\ w \in BOOLEAN /\ line \in Seq(Calls)
    /\ gone \subseteq Ids /\ stale \subseteq gone
    /\ pc \in [Calls -> {"idle", "acq", "queued", "held", "rel", "rdone",
                         "cb", "cu", "lv", "rb", "done", "dead"}]
    /\ lf \in [Calls -> 0..MaxGrants] /\ att \in [Calls -> 1..2]

\* No two tokens' calls believe they hold the lock at once.
MutualExclusion ==
    \A x, y \in Calls : pc[x] = "held" /\ pc[y] = "held" => Tok(x) = Tok(y)

\* What a holder believes: a call that believes it holds the lock holds it
\* under its own fence (new: by its own record), and the hash counts at
\* least as many holds as its owner's calls believe they have, so no
\* request (late, repeated, concurrent, a give-back) frees the lock under
\* another call's lease.
HoldsBelieved ==
    /\ \A x \in Calls : pc[x] = "held" =>
         o = Tok(x) /\ f = lf[x] /\ (New => InR(Id(x)))
    /\ o # None => Cardinality(Believers(o)) <= n

\* No orphan hold: once nothing is in transit and no cleanup runs, every
\* hold the hash counts is one a call believes it has, or a hand-off to a
\* waiting (or dead: it runs out) call not yet picked up.
Quiet == net = {} /\ \A x \in Calls : pc[x] \in {"idle", "queued", "held", "rdone", "done", "dead"}
Pending == IF p # None /\ pc[p] \in {"queued", "dead"} THEN 1 ELSE 0
NoOrphanHold ==
    Quiet => IF o = None THEN n = 0 ELSE n = Cardinality(Believers(o)) + Pending

\* The wait flag: a held lock with somebody waiting in line says so, so
\* the release that skips the queue when w is unset leaves nobody waiting.
Live(x) == pc[x] \in {"queued", "acq"}
WaitFlag == (o # None /\ \E x \in Range(line) : Live(x)) => w

\* A waiter is served within a bound once the lock is free: a script that
\* frees the lock hands it to the head of the line at once, so a free lock
\* with a live waiter in line exists only after the hash ran out of TTL
\* (its waiters then ask within the TTL they were told).
NoIdleLine == (o = None /\ \E x \in Range(line) : pc[x] = "queued") => lapsed

\* A bounded footprint: the per-hold fields name holds that stand (at most
\* n), every place in line is a waiting call's (or a dead one's until its
\* deadline, or one whose leave is on its way), and no buried id outlives
\* its hour.
HoldFields == Range(r) \cup meta
Footprint ==
    /\ Cardinality(HoldFields) <= n
    /\ \A x \in Range(line) : pc[x] \in {"queued", "acq", "dead", "lv", "cb", "cu"}
    /\ stale = {}

\* What the lock answers a lease describes its own hold: TTLLeft and
\* Renew of a released lease (its Release answered) say "not held".
\* Old ttlScript and renewScript check the token and the fence; new, the
\* lease's own record too.
HoldAnswer(x) == o = Tok(x) /\ f = lf[x] /\ (New => InR(Id(x)))
AnswersOwnHold == \A x \in Calls : pc[x] = "rdone" => ~HoldAnswer(x)

\* Close grants nothing: no call of the closed client keeps a lease it was
\* granted after Close.
ClosedGrantsNothing == ~cg
=============================================================================
