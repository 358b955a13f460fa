package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
)

// Migrate moves a hash slot of a Redis Cluster to another master under
// load, as redis-cli --cluster reshard does: the target is set IMPORTING
// and the source MIGRATING, then the slot's keys move one at a time
// (MIGRATE, with their TTLs), Pace apart, for as long as the window
// lasts; Stop moves what is left and gives the slot to the target
// everywhere (SETSLOT NODE). Meanwhile a client is redirected with ASK for
// a key that moved, is refused TRYAGAIN for a command whose keys are
// split between the two, and with MOVED once the slot is the target's.
// The source and target talk through the target's replication proxy, the
// address it announces.
type Migrate struct {
	Env env.Env
	// Slot is the hash slot to move (the lock's).
	Slot int
	// Pace is the time between two keys' moves; 0 means 50ms.
	Pace time.Duration

	mu           sync.Mutex
	from, to     env.Node
	fromID, toID string // cluster node IDs
	moved        int
	created      int  // the most keys of the slot seen on the target while importing
	asked        bool // the slot was set migrating
	done         bool
	stop         chan struct{}
	loop         chan error
	owner        string // the slot's master after Stop
}

// Name is "migrate slot <slot>".
func (m *Migrate) Name() string {
	return contract.FaultMigrate + " slot " + strconv.Itoa(m.Slot)
}

// Start sets the slot migrating from its master to the next master (by
// node ID) and starts moving its keys.
func (m *Migrate) Start(ctx context.Context) error {
	topo := m.Env.Topology()
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name(), err)
	}
	var masters []string
	for id, slots := range v.Masters {
		if len(slots) > 0 {
			masters = append(masters, id)
		}
	}
	slices.Sort(masters)
	src := v.Owner(m.Slot)
	i := slices.Index(masters, src)
	if i < 0 || len(masters) < 2 {
		return fmt.Errorf("%s: slot %d is served by %q of masters %v: nowhere to move it", m.Name(), m.Slot, src, masters)
	}
	dst := masters[(i+1)%len(masters)]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.from, err = topo.Node(src); err != nil {
		return err
	}
	if m.to, err = topo.Node(dst); err != nil {
		return err
	}
	m.fromID, m.toID = v.RedisIDs[src], v.RedisIDs[dst]
	if err := env.Admin(ctx, topo.Auth, m.to.Upstream, "CLUSTER", "SETSLOT", m.Slot, "IMPORTING", m.fromID); err != nil {
		return fmt.Errorf("%s: %w", m.Name(), err)
	}
	if err := env.Admin(ctx, topo.Auth, m.from.Upstream, "CLUSTER", "SETSLOT", m.Slot, "MIGRATING", m.toID); err != nil {
		// The heal: the target imports nothing after all.
		undo := env.Admin(context.WithoutCancel(ctx), topo.Auth, m.to.Upstream, "CLUSTER", "SETSLOT", m.Slot, "STABLE")
		return errors.Join(fmt.Errorf("%s: %w", m.Name(), err), undo)
	}
	m.asked = true
	m.stop, m.loop = make(chan struct{}), make(chan error, 1)
	pace := m.Pace
	if pace <= 0 {
		pace = 50 * time.Millisecond
	}
	go func() { m.loop <- m.moveKeys(context.WithoutCancel(ctx), pace) }()
	return nil
}

// moveKeys moves one key of the slot every pace until Stop.
func (m *Migrate) moveKeys(ctx context.Context, pace time.Duration) error {
	t := time.NewTicker(pace)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return nil
		case <-t.C:
		}
		if _, err := m.moveSome(ctx, 1); err != nil {
			return err
		}
		// A key made while the slot migrates goes to the target (ASK):
		// a lock that holds its key briefly has it there, not moved.
		c := env.AdminClient(m.Env.Topology().Auth, m.to.Upstream)
		n, err := c.ClusterCountKeysInSlot(ctx, m.Slot).Result()
		c.Close()
		if err == nil {
			m.mu.Lock()
			m.created = max(m.created, int(n))
			m.mu.Unlock()
		}
	}
}

// moveSome moves up to n keys of the slot from the source to the target
// and reports how many keys were left there before.
func (m *Migrate) moveSome(ctx context.Context, n int) (int, error) {
	c := env.AdminClient(m.Env.Topology().Auth, m.from.Upstream)
	defer c.Close()
	keys, err := c.ClusterGetKeysInSlot(ctx, m.Slot, n).Result()
	if err != nil {
		return 0, fmt.Errorf("%s: GETKEYSINSLOT on %s: %w", m.Name(), m.from.ID, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	host, port, err := net.SplitHostPort(m.to.Addr)
	if err != nil {
		return 0, err
	}
	args := []any{"MIGRATE", host, port, "", 0, 5000}
	// The target asks the same login as every node (the topology's).
	if a := m.Env.Topology().Auth; a.Username != "" {
		args = append(args, "AUTH2", a.Username, string(a.Password))
	} else if a.Password != "" {
		args = append(args, "AUTH", string(a.Password))
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		return len(keys), fmt.Errorf("%s: MIGRATE %v from %s to %s: %w", m.Name(), keys, m.from.ID, m.to.ID, err)
	}
	m.mu.Lock()
	m.moved += len(keys)
	m.mu.Unlock()
	return len(keys), nil
}

// Stop moves the keys left and gives the slot to the target: the target
// first, then the source, then every other master (so that no node sends
// a client back and forth), and waits until all agree.
func (m *Migrate) Stop(ctx context.Context) error {
	m.mu.Lock()
	started := m.stop != nil && !m.done
	m.done = true
	m.mu.Unlock()
	if !started {
		return nil
	}
	close(m.stop)
	var errs []error
	if err := <-m.loop; err != nil {
		errs = append(errs, err)
	}
	for {
		n, err := m.moveSome(ctx, 100)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if n == 0 {
			break
		}
	}
	topo := m.Env.Topology()
	order := []env.Node{m.to, m.from}
	if v, err := env.View(ctx, topo, m.to.ID); err != nil {
		errs = append(errs, err)
	} else {
		// The other masters (replicas refuse SETSLOT, and learn of it
		// from their masters).
		for _, n := range topo.Cluster {
			if _, master := v.Masters[n.ID]; master && n.ID != m.to.ID && n.ID != m.from.ID {
				order = append(order, n)
			}
		}
	}
	for _, n := range order {
		if err := env.Admin(ctx, topo.Auth, n.Upstream, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.toID); err != nil {
			errs = append(errs, err)
		}
	}
	v, err := env.WaitClusterAgreed(ctx, topo)
	if err != nil {
		errs = append(errs, err)
	}
	m.mu.Lock()
	m.owner = v.Owner(m.Slot)
	m.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: finish: %w", m.Name(), err)
	}
	return nil
}

// Evidence implements Witness: where the slot went, how many keys moved
// and the most seen on the target while it imported; Bit when the slot
// changed hands (its keys, if any were there, with it: a lock whose keys
// are elsewhere, Redlock's, only saw its slot's clients redirected).
func (m *Migrate) Evidence() Evidence {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.asked {
		return Evidence{Text: fmt.Sprintf("slot %d was not set migrating", m.Slot)}
	}
	return Evidence{Text: fmt.Sprintf("slot %d moved from %s to %s (served by %s after): %d keys migrated, up to %d on the target while it imported",
		m.Slot, m.from.ID, m.to.ID, m.owner, m.moved, m.created), Bit: m.owner == m.to.ID}
}

// ShardOutage takes a whole shard of a Redis Cluster down: its master and
// replicas are killed together, so that no replica can take over and the
// shard's slots are served by nobody for the window (the other shards
// serve on: cluster-require-full-coverage is off); Stop restarts them,
// without persistence: the master comes back with its slots (its
// nodes.conf) and no data, and every lock of the shard is forgotten.
type ShardOutage struct {
	// Lock names the holder and the lock whose keys are the evidence
	// (its Nodes are the shard master's direct address).
	Lock *KeyLoss
	Env  env.Env
	// Master and Replicas are the shard's nodes.
	Master   string
	Replicas []string

	mu      sync.Mutex
	before  []string
	killed  []string
	restart []func(context.Context) error // each killed node's restart (env.Crash)
}

// Name is "shard-outage <master> (<client> <key>)".
func (o *ShardOutage) Name() string {
	return contract.FaultShardOutage + " " + o.Master + " (" + o.Lock.Client + " " + o.Lock.Key + ")"
}

// Start reads the lock's keys and kills every node of the shard.
func (o *ShardOutage) Start(ctx context.Context) error {
	before, err := o.Lock.allKeys(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.before = before
	errs := []error{err}
	for _, id := range append([]string{o.Master}, o.Replicas...) {
		// A dead process's port refuses (env.Crash says why).
		restart, err := env.Crash(ctx, o.Env, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		o.killed = append(o.killed, id)
		o.restart = append(o.restart, restart)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", o.Name(), err)
	}
	return nil
}

// Stop restarts the killed nodes, the master first, and waits until the
// cluster agrees again.
func (o *ShardOutage) Stop(ctx context.Context) error {
	o.mu.Lock()
	killed, restart := o.killed, o.restart
	o.killed, o.restart = nil, nil
	o.mu.Unlock()
	var errs []error
	for _, r := range restart { // the master first
		errs = append(errs, r(ctx))
	}
	if len(killed) > 0 {
		if _, err := env.WaitClusterAgreed(ctx, o.Env.Topology()); err != nil {
			errs = append(errs, err)
		}
		// The window lasts until the shard serves again.
		if err := env.WaitClusterOK(ctx, o.Env.Topology(), killed...); err != nil {
			errs = append(errs, err)
		}
	}
	after, err := o.Lock.allKeys(ctx)
	errs = append(errs, err)
	o.mu.Lock()
	o.Lock.record(Evidence{Bit: len(killed) > 0,
		Text: fmt.Sprintf("shard of %s (replicas %v) down and restarted without persistence while %s held %s: its keys before %s, after the restart %s",
			o.Master, o.Replicas, o.Lock.Client, o.Lock.Key, list(o.before), list(after))})
	o.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: heal: %w", o.Name(), err)
	}
	return nil
}

// Evidence implements Witness: the lock's keys before the outage and
// after the restart; Bit when the shard went down (for a lock whose keys
// are elsewhere, Redlock's, with none of them).
func (o *ShardOutage) Evidence() Evidence { return o.Lock.Evidence() }
