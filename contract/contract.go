// Package contract holds what every stage of lockproof shares: the names
// of faults and properties, the verdicts, the files of a run directory, the
// exit codes, and summary.json's types (Summary, Row, Cell) with one row
// type that the runner writes and the reports read. It imports nothing of
// lockproof but an internal JSON helper, so that the producers (chaos), the checker, the runner, the
// reports and the TLA+ trace converter can all import it (docs/DESIGN.md
// is the prose contract).
//
// A fault op's name in a history starts with its fault's name, followed by
// details ("partition [c0-1 c0-2]", "failover partition"): readers find
// the kind as the first word (FaultKind).
package contract

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Fault names.
const (
	FaultNone        = "none"
	FaultLatency     = "latency"
	FaultPartition   = "partition"
	FaultPauseClient = "pause-client"
	FaultPauseServer = "pause-server"
	FaultFailover    = "failover"
	FaultCrashClient = "crash-client"
	FaultClockSkew   = "clock-skew"
	FaultReset       = "reset"
	FaultBandwidth   = "bandwidth"
	// FaultPauseProcess pauses a client run as a child process with SIGSTOP.
	FaultPauseProcess = "pause-process"
	// FaultKillProcess SIGKILLs a client run as a child process.
	FaultKillProcess = "kill-process"
	// FaultFailoverSkew is a failover to a replica whose clock runs behind
	// the old master's: clock skew between Redis nodes.
	FaultFailoverSkew = "failover-skew"
	// FaultKeyLoss deletes a holder's lock keys: Redis forgets the lock
	// while its holder lives.
	FaultKeyLoss = "key-loss"
	// FaultCrowd is no fault but a crowd of clients on one key.
	FaultCrowd = "crowd"
	// FaultPubSubReset drops the master's pub/sub connections while it
	// refuses SUBSCRIBE: subscriptions die, commands pass.
	FaultPubSubReset = "pubsub-reset"
	// FaultForceUnlock is an operator's force unlock of a held lock
	// through the lock's own API.
	FaultForceUnlock = "force-unlock"
	// FaultRestart crashes the master and restarts it without
	// persistence: Redis forgets every lock while their holders live.
	FaultRestart = "restart"
	// FaultIsolate cuts one holder off from every Redis, its traffic
	// held, while its write is still ahead.
	FaultIsolate = "isolate"
	// FaultTakeover, on a Redis Cluster, makes the replica of the lock's
	// shard master take its slots at once (CLUSTER FAILOVER TAKEOVER)
	// after a replication lag: a failover without an election.
	FaultTakeover = "takeover"
	// FaultMinorityPartition, on a Redis Cluster, cuts the lock's shard
	// master off from the other nodes while clients still reach it: it
	// serves alone until the node timeout, then its replica is promoted.
	FaultMinorityPartition = "minority-partition"
	// FaultMigrate, on a Redis Cluster, moves the lock's hash slot to
	// another master under load (MIGRATE; clients see ASK, then MOVED).
	FaultMigrate = "migrate"
	// FaultLateDelivery holds some requests in transit past their
	// sender's deadline and delivers them then, as a TCP retransmit does:
	// they land after their sender gave up, while the lock's recovery
	// paths (the cleanup of an unknown outcome, a retry) run.
	FaultLateDelivery = "late-delivery"
	// FaultShardOutage, on a Redis Cluster, kills the lock's shard, its
	// master and replicas, and restarts them without persistence.
	FaultShardOutage = "shard-outage"
	// FaultClockRate makes the lock node's clock run fast, within the
	// drift bound the contract assumes (docs/DESIGN.md: 1%): its TTLs
	// count down that much faster than the clients' clocks, so a validity
	// claim without its drift allowance outlives the key.
	FaultClockRate = "clock-rate"
	// FaultOOM puts the lock's node at its maxmemory with the noeviction
	// policy, its memory coming and going around the limit: it refuses
	// some of the writes it is sent (-OOM, surely without effect) and
	// takes others.
	FaultOOM = "oom"
	// FaultReplicaPause freezes the replicas of the lock's master while
	// the master serves on: nobody acknowledges its writes, so a WAIT for
	// a replica's acknowledgement times out (package lock's ReplicaAcks
	// gives its acquires back then).
	FaultReplicaPause = "replica-pause"
	// FaultStall is no fault the harness injects but one it observed: a
	// process of clients (or the harness's own) that did not run for a
	// while, waiting for a core or stopped by its runtime (package
	// internal/stallwatch). Its op's name is "stall" and the names of the
	// clients it froze ("stall c0-1 c0-2"); its call and return are the
	// stall's window. It is in no catalogue and has no prediction of its
	// own: its window excuses what a pause of those clients may cause
	// (ExcusesAs), within the same reach (docs/DESIGN.md, "Stalls").
	FaultStall = "stall"
)

// FaultTraits is what a fault means to the judge, as data: one row per
// fault of the catalogues (and the stall the harness observes), read by
// every place that asks what a fault is like instead of switching on its
// name: the profiles' predictions (package judge) are a table keyed by
// these traits, and the specimens' (package zoo) read them too. A new
// fault is its file (package chaos), its call in chaos.Catalogue, and its
// row here; a test of package chaos holds every catalogue fault to a row.
type FaultTraits struct {
	// Like is the fault whose predictions this one shares ("": its own):
	// a cluster shard's takeover and minority partition are failovers,
	// its outage a restart.
	Like string
	// FailsOver: the fault may move a key's master to a replica that
	// lacks its latest writes, so that two masters may each have served
	// the key.
	FailsOver bool
	// Forgets: Redis forgets a held lock, keys and fence counter.
	Forgets bool
	// Predicted: DESIGN.md's guarantees say what a lock does under it
	// (its G1–G5 sections discuss it); under any other the matrix makes
	// no prediction until a lock states one of its own.
	Predicted bool
	// KeepsServing: the deployment answers every client's commands as
	// usual through its window, so the lock's promises to waiters and
	// holders stand then, and the window excuses no late hand-off or loss
	// notice.
	KeepsServing bool
	// StopsClients: the fault freezes or kills clients (goroutines or a
	// process), so a call in flight across its window returns late
	// through no fault of the lock (calls, rule late-return).
	StopsClients bool
	// Observed: the harness measured it rather than injected it (a
	// stall): no catalogue lists it, no run is planned for it.
	Observed bool
	// ExcusesAs is the fault whose prediction says what a window of it
	// may excuse ("": its own): a stall's is pause-client's.
	ExcusesAs string

	// The traits below say what the profiles' predictions (package judge)
	// and the specimens' (package zoo) read of a fault: each is the
	// mechanism of a prediction, so that a fault that has it is predicted
	// what it causes, and a fault that lacks them all, that every
	// property holds.

	// PausesHolder: the fault freezes a holder past its lease at the
	// lock's fault point and then wakes it, so that it acts on a check
	// another client's grant made false (pause-client; a frozen process
	// and an observed stall are outside the profiles' predictions).
	PausesHolder bool
	// SkewsPromoted: the fault's failover promotes a replica whose clock
	// runs behind the old master's, so that expiries written by the old
	// master's clock last up to the skew longer on the new one.
	SkewsPromoted bool
	// DeliversLate: the fault holds requests in transit past their
	// sender's deadline and delivers them then: an acquire, a release or
	// a write takes effect after its caller gave up.
	DeliversLate bool
	// CutsSubscriptions: the fault kills clients' pub/sub connections
	// while the servers keep their data and roles, so that a waiter hears
	// of no hand-off until its subscription is made again (a partition, a
	// reset; with KeepsServing, pubsub-reset, which also holds back the
	// connections dialed after each drop).
	CutsSubscriptions bool
	// Delays: the fault delays or loses commands and replies between
	// clients and servers that keep their data and roles, within the
	// contract's timing (latency, a partition, a reset, a frozen master):
	// a command may land after its sender's lease ran out, a reply may
	// never come. DeliversLate's requests, landing past their sender's
	// deadline, are its own trait.
	Delays bool
	// LosesReplies: the fault loses replies, or holds them past their
	// caller's timeout, between clients and servers that keep their data
	// and roles (a partition, a reset, a frozen master): a command may take
	// effect while its caller believes it did not.
	LosesReplies bool
	// KillsClients: the fault kills clients for good (goroutines or a
	// process): a holder that dies never releases, a waiter that dies
	// leaves its place in line to expire.
	KillsClients bool
	// SkewsClients: a client's clock runs ahead of the others', so that a
	// lock that reads client clocks sees another's unexpired lock as
	// expired.
	SkewsClients bool
	// Restarts: the lock's server crashes and comes back without its
	// data (a master, or a cluster shard, restarted without persistence).
	Restarts bool
	// RefusesWrites: the lock's node refuses some of the writes it is
	// sent (surely without effect) and takes others.
	RefusesWrites bool
	// FreezesMaster: the lock's master freezes, having executed commands
	// whose replies reach their clients only after the thaw.
	FreezesMaster bool
	// Unserved: the key's servers serve nobody for a while (a cluster
	// shard down), so an acquire of a key surely free is refused then.
	Unserved bool
	// UnservedOnCluster: on a Redis Cluster (only there) the fault leaves
	// the key's shard without a master until its replica is elected, where
	// Sentinel's failed master keeps serving its clients.
	UnservedOnCluster bool
}

// Has reports whether t has every trait of key: each bool field true in
// key is true in t, and each string field key sets is t's. A table keyed
// by traits (the profiles' predictions) matches rows with it.
func (t FaultTraits) Has(key FaultTraits) bool {
	tv, kv := reflect.ValueOf(t), reflect.ValueOf(key)
	for i := range kv.NumField() {
		k := kv.Field(i)
		if !k.IsZero() && !k.Equal(tv.Field(i)) {
			return false
		}
	}
	return true
}

// faultTraits is the trait table (FaultTraits), by fault name.
func faultTraits() map[string]FaultTraits {
	return map[string]FaultTraits{
		FaultNone:              {Predicted: true},
		FaultLatency:           {Predicted: true, Delays: true},
		FaultPartition:         {Predicted: true, CutsSubscriptions: true, Delays: true, LosesReplies: true},
		FaultPauseClient:       {Predicted: true, StopsClients: true, PausesHolder: true},
		FaultPauseServer:       {Predicted: true, Delays: true, LosesReplies: true, FreezesMaster: true},
		FaultFailover:          {Predicted: true, FailsOver: true, UnservedOnCluster: true},
		FaultCrashClient:       {Predicted: true, StopsClients: true, KillsClients: true},
		FaultClockSkew:         {Predicted: true, SkewsClients: true},
		FaultFailoverSkew:      {Predicted: true, FailsOver: true, SkewsPromoted: true, UnservedOnCluster: true},
		FaultKeyLoss:           {Predicted: true, Forgets: true},
		FaultPubSubReset:       {Predicted: true, KeepsServing: true, CutsSubscriptions: true},
		FaultTakeover:          {Predicted: true, FailsOver: true, Like: FaultFailover},
		FaultMinorityPartition: {Predicted: true, FailsOver: true, Like: FaultFailover},
		FaultMigrate:           {Predicted: true},
		FaultShardOutage:       {Predicted: true, Forgets: true, Restarts: true, Unserved: true, Like: FaultRestart},
		FaultCrowd:             {Predicted: true},
		FaultRestart:           {Predicted: true, Forgets: true, Restarts: true},
		FaultForceUnlock:       {Predicted: true, Forgets: true},
		FaultIsolate:           {},
		FaultReset:             {Predicted: true, CutsSubscriptions: true, Delays: true, LosesReplies: true},
		FaultBandwidth:         {},
		FaultPauseProcess:      {StopsClients: true},
		FaultKillProcess:       {StopsClients: true, KillsClients: true},
		FaultLateDelivery:      {Predicted: true, DeliversLate: true},
		FaultClockRate:         {Predicted: true},
		FaultOOM:               {Predicted: true, RefusesWrites: true},
		FaultReplicaPause:      {Predicted: true},
		FaultStall:             {StopsClients: true, Observed: true, ExcusesAs: FaultPauseClient},
	}
}

// Traits is the row of fault kind in the trait table; ok is false for a
// name the table does not know (no catalogue fault: every trait false).
func Traits(kind string) (t FaultTraits, ok bool) {
	t, ok = faultTraits()[kind]
	return t, ok
}

// TraitNames are the faults the trait table has a row for, sorted.
func TraitNames() []string {
	var names []string
	for n := range faultTraits() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Observed reports whether a fault of kind is one the harness measured
// rather than injected (FaultTraits.Observed).
func Observed(kind string) bool { t, _ := Traits(kind); return t.Observed }

// ExcusesAs is the fault whose prediction says what a window of kind may
// excuse (FaultTraits.ExcusesAs): a stall's is pause-client's; any other
// fault's is its own.
func ExcusesAs(kind string) string { t, _ := Traits(kind); return cmp.Or(t.ExcusesAs, kind) }

// Like is the fault whose predictions a fault shares (FaultTraits.Like):
// a cluster shard's takeover and minority partition are failovers, its
// outage a restart; any other fault is like itself. The predictions read
// a fault's traits, which an analog's row repeats (a shard's takeover
// fails over), so that what a lock is known to do under Sentinel's
// failover it is predicted to do under a shard's; Like is for a reader
// that asks for one fault's own knowledge and its analogs'.
func Like(fault string) string { t, _ := Traits(fault); return cmp.Or(t.Like, fault) }

// FailsOver reports whether a fault of kind may move a key's master to a
// replica that lacks its latest writes (FaultTraits.FailsOver).
func FailsOver(kind string) bool { t, _ := Traits(kind); return t.FailsOver }

// Forgets reports whether a fault of kind makes Redis forget a held
// lock (FaultTraits.Forgets): an operator's DEL (key-loss), a restart
// without persistence (restart, a cluster's shard-outage), an operator's
// force unlock.
func Forgets(kind string) bool { t, _ := Traits(kind); return t.Forgets }

// Topologies: the shapes of deployment a run can take (summary.json's
// topology, `lockproof run --topology`): two of Redis, and two
// consensus stores whose locks the matrix sets beside Redis's.
const (
	// TopologySentinel is one master with replicas watched by Sentinels
	// (the default; a summary.json without a topology is one).
	TopologySentinel = "sentinel"
	// TopologyCluster is a Redis Cluster: masters each serving a range
	// of the hash slots, each with replicas, failing over on its own.
	TopologyCluster = "cluster"
	// TopologyEtcd is an etcd cluster of 3 members (Raft): the lock's
	// store for the etcd locks (locker.Needs.Store).
	TopologyEtcd = "etcd"
	// TopologyZooKeeper is a ZooKeeper ensemble of 3 servers (Zab): the
	// lock's store for the ZooKeeper locks.
	TopologyZooKeeper = "zookeeper"
)

// StoreTopologies are the topologies of the consensus stores, whose
// locks need their store (locker.Needs.Store) rather than Redis.
func StoreTopologies() []string { return []string{TopologyEtcd, TopologyZooKeeper} }

// IsStore reports whether topology is a consensus store's.
func IsStore(topology string) bool { return slices.Contains(StoreTopologies(), topology) }

// Topologies are the topology names, the default first: Redis's, then
// the consensus stores'.
func Topologies() []string {
	return []string{TopologySentinel, TopologyCluster, TopologyEtcd, TopologyZooKeeper}
}

// Predicted reports whether DESIGN.md's guarantees say what a lock does
// under fault (FaultTraits.Predicted).
func Predicted(fault string) bool { t, _ := Traits(fault); return t.Predicted }

// KeepsServing reports whether the deployment answers every client's
// commands as usual through the window of a fault of kind
// (FaultTraits.KeepsServing): only pubsub-reset so far.
func KeepsServing(kind string) bool { t, _ := Traits(kind); return t.KeepsServing }

// StopsClients reports whether a fault of kind freezes or kills clients
// (FaultTraits.StopsClients). A stall (FaultStall) is one.
func StopsClients(kind string) bool { t, _ := Traits(kind); return t.StopsClients }

// FaultKind is the fault name a history fault op's name starts with.
func FaultKind(opName string) string {
	k, _, _ := strings.Cut(opName, " ")
	return k
}

// ExcuseAfter is how long after a fault window of kind its effect on
// property prop may still show, for a lease of ttl: a violation of a
// property that the fault may break is excused only when one of its
// witnesses overlaps that window or this long past its end (docs/DESIGN.md,
// "Judging"). A negative bound is the run's end: the effect has none.
//   - A failover's lost lease outlives the promotion by its validity,
//     up to a TTL; a lost release's hold comes back for a TTL, or for
//     as long as its owner re-enters it, so waiter liveness has no bound;
//     nor have the fair queue and hand-off promptness, whose waiters lost
//     their places and come back in line only at their next refresh.
//   - A forgotten lock (key-loss, restart, force-unlock, shard-outage)
//     is held on by its holder for its validity; its waiters lose their
//     places and take their time to come back in line.
//   - Expiries written by a clock that runs skew ahead of the promoted
//     replica's last up to skew longer (failover-skew).
//   - pubsub-reset holds back, for half a TTL, the connections dialed
//     right after each drop: a waiter whose look waited on one lost its
//     place by the time it rejoined the line, within a TTL of the window
//     (a waiter deaf to its hand-offs after that is the lock's fault).
//   - Hand-off promptness after any other fault that may break it (a
//     cut, pubsub-reset): to the run's end. A cut subscription is made
//     again only once the lock finds it dead (package lock: a read that
//     fails, or a ping unanswered for 3 s, then a backoff up to 1 s), and
//     until then its waiters pick hand-offs up at their own looks; the
//     property bites where no fault struck (simulation, partition seed 2:
//     a release 4 TTLs after the window, its head served at its look).
//   - Any other fault's effect: within 4 TTLs of its window (a frozen
//     client's op returns within its timeout of the thaw).
func ExcuseAfter(kind, prop string, ttl, skew time.Duration) time.Duration {
	switch {
	case FailsOver(kind) && (prop == PropLiveness || prop == PropFairness || prop == PropPromptness):
		return -1
	case FailsOver(kind):
		return 2*ttl + skewOf(kind, skew)
	case Forgets(kind) && (prop == PropLiveness || prop == PropFairness || prop == PropPromptness):
		return 4 * ttl
	case Forgets(kind):
		return 2 * ttl
	case prop == PropPromptness:
		return -1
	case heldBack(kind):
		return ttl
	}
	return 4 * ttl
}

// heldBack reports whether a fault of kind cuts subscriptions while the
// deployment keeps serving (pubsub-reset): the connections dialed after
// each drop are held back, for half a TTL.
func heldBack(kind string) bool {
	t, _ := Traits(kind)
	return t.CutsSubscriptions && t.KeepsServing
}

// skewOf is how much longer than their TTL the expiries a failover of
// kind carries over may last: the skew, for a promoted replica whose
// clock is behind (FaultTraits.SkewsPromoted).
func skewOf(kind string, skew time.Duration) time.Duration {
	if t, _ := Traits(kind); t.SkewsPromoted {
		return skew
	}
	return 0
}
