package vnode

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
			return fmt.Errorf("vnode: copy key %q: %w", k, err)
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
		return fmt.Errorf("vnode: promote: no node at %s", addr)
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
