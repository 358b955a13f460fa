package nodes

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Copy makes dst hold what src holds now, as a replica that was in sync
// at this instant would: every key of the selected database with its
// value and time to live, the TTL longer by behind for a replica whose
// clock runs that far behind src's (Redis replicates an expiry as an
// absolute time of the master's clock, which the replica reads on its
// own). dst is emptied first. It copies strings, hashes, sets, sorted sets
// and lists, and refuses any other type, naming the key: a copy that
// dropped a key would lose a write the failover did not.
func Copy(dst, src *miniredis.Miniredis, behind time.Duration) error {
	dst.FlushAll()
	for _, k := range src.Keys() {
		var err error
		switch typ := src.Type(k); typ {
		case "string":
			var v string
			if v, err = src.Get(k); err == nil {
				err = dst.Set(k, v)
			}
		case "hash":
			var fs []string
			if fs, err = src.HKeys(k); err == nil {
				fv := make([]string, 0, 2*len(fs))
				for _, f := range fs {
					fv = append(fv, f, src.HGet(k, f))
				}
				dst.HSet(k, fv...)
			}
		case "set":
			var ms []string
			if ms, err = src.Members(k); err == nil {
				_, err = dst.SAdd(k, ms...)
			}
		case "zset":
			var zs map[string]float64
			if zs, err = src.SortedSet(k); err == nil {
				for m, score := range zs {
					if _, err = dst.ZAdd(k, score, m); err != nil {
						break
					}
				}
			}
		case "list":
			var vs []string
			if vs, err = src.List(k); err == nil {
				_, err = dst.Push(k, vs...)
			}
		default:
			err = fmt.Errorf("type %q is not copied", typ)
		}
		if err != nil {
			return fmt.Errorf("simnet: copy key %q: %w", k, err)
		}
		if ttl := src.TTL(k); ttl > 0 {
			dst.SetTTL(k, ttl+behind)
		}
	}
	return nil
}

// Promote puts a node holding m at addr in place of the node there, as a
// failover to a replica with m's data does: every connection to the old
// node is reset (its clients reconnect, to the new node), and the new
// node's clock runs behind the bubble's by behind. The old node stops at
// Close.
func (n *Net) Promote(addr string, m *miniredis.Miniredis, behind time.Duration) error {
	n.mu.Lock()
	old, ok := n.nodes[addr]
	if !ok {
		n.mu.Unlock()
		return fmt.Errorf("simnet: promote: no node at %s", addr)
	}
	n.nodes[addr] = &Node{Addr: addr, M: m, Behind: behind, last: time.Now()}
	n.retired = append(n.retired, old)
	var ls []*link
	for l := range n.links {
		if l.node == old {
			ls = append(ls, l)
		}
	}
	n.mu.Unlock()
	// In an order of the seed's, not the map's: the resets wake their
	// clients' goroutines in this order.
	slices.SortFunc(ls, func(a, b *link) int { return strings.Compare(a.name, b.name) })
	for _, l := range ls {
		l.close()
		l.wg.Wait()
	}
	return nil
}

// replica is a replica a failover promotes (SyncReplica, PromoteReplica).
type replica struct {
	addr   string // the node it replicates, and whose place it takes
	m      *miniredis.Miniredis
	behind time.Duration
	at     time.Time // when it was in sync
}

// SyncReplica makes a replica of the node at addr, in sync now (Copy), its
// clock behind the bubble's by behind, to be promoted in its place
// (PromoteReplica) or dropped (DropReplica) by the id it returns, with how
// many keys the replica holds. Two failovers of one node at once have a
// replica each.
func (n *Net) SyncReplica(addr string, behind time.Duration) (id, keys int, err error) {
	r := &replica{addr: addr, m: miniredis.NewMiniRedis(), behind: behind}
	node := n.Node(addr)
	node.Advance()
	err = Copy(r.m, node.M, behind)
	r.at = time.Now()
	n.mu.Lock()
	if n.replicas == nil {
		n.replicas = map[int]*replica{}
	}
	n.replicaSeq++
	id = n.replicaSeq
	n.replicas[id] = r
	n.mu.Unlock()
	return id, len(r.m.Keys()), err
}

// takeReplica removes and returns the replica of id; nil: none.
func (n *Net) takeReplica(id int) *replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[id]
	delete(n.replicas, id)
	return r
}

// PromoteReplica promotes the replica of id (SyncReplica): its keys
// first expire on its own clock for the time since it was in sync, then
// it takes the node's place (Promote). It returns how many entries of the
// old node's data the replica lacks: the writes lost in the gap.
func (n *Net) PromoteReplica(id int) (lost int, err error) {
	r := n.takeReplica(id)
	if r == nil {
		return 0, fmt.Errorf("simnet: promote: no replica %d", id)
	}
	addr := r.addr
	// The replica's keys expired on its clock meanwhile.
	r.m.FastForward(time.Since(r.at))
	node := n.Node(addr)
	node.Advance()
	lost = gap(node.M, r.m)
	return lost, n.Promote(addr, r.m, r.behind)
}

// DropReplica discards the replica of id (SyncReplica), if any.
func (n *Net) DropReplica(id int) {
	if r := n.takeReplica(id); r != nil {
		r.m.Close()
	}
}

// gap counts the entries (keys with their values, as Dump renders them)
// of the old master that the promoted replica does not have.
func gap(old, replica *miniredis.Miniredis) int {
	have := map[string]bool{}
	for _, l := range strings.Split(replica.Dump(), "\n") {
		have[l] = true
	}
	n := 0
	for _, l := range strings.Split(old.Dump(), "\n") {
		if l != "" && !have[l] {
			n++
		}
	}
	return n
}
