package env

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoMaster: no Sentinel majority agrees on a master address.
var ErrNoMaster = errors.New("no master agreed by the sentinels")

func sentinelClient(a Auth, addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(a.sentinelOptions(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1, Protocol: 2}))
}

// MasterAddr returns the master address a majority of the Sentinels of t report.
// A topology without Sentinels (a bring-your-own lone master) has its
// master at Data[0].
func MasterAddr(ctx context.Context, t Topology) (string, error) {
	if len(t.Sentinels) == 0 && len(t.Data) > 0 {
		return t.Data[0].Addr, nil
	}
	votes := map[string]int{}
	var errs []error
	for _, s := range t.Sentinels {
		c := sentinelClient(t.Auth, s)
		r, err := c.GetMasterAddrByName(ctx, t.MasterName).Result()
		_ = c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", s, err))
			continue
		}
		if len(r) == 2 {
			votes[net.JoinHostPort(r[0], r[1])]++
		}
	}
	for a, v := range votes {
		if v >= Quorum(len(t.Sentinels)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("master %q: votes %v: %w (%w)", t.MasterName, votes, ErrNoMaster, errors.Join(errs...))
}

// Master returns the data node that a majority of the Sentinels report as master.
func Master(ctx context.Context, t Topology) (Node, error) {
	a, err := MasterAddr(ctx, t)
	if err != nil {
		return Node{}, err
	}
	for _, n := range t.Data {
		if n.Addr == a {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("sentinels report master %s, which is no data node: %w", a, ErrNoNode)
}

// WaitMaster waits until a Sentinel majority reports a master other than
// notID (a failover completed) and returns it; bounded by ctx.
func WaitMaster(ctx context.Context, t Topology, notID string) (Node, error) {
	var last error
	for {
		n, err := Master(ctx, t)
		if err == nil && n.ID != notID {
			return n, nil
		}
		if err == nil {
			err = fmt.Errorf("master still %s", n.ID)
		}
		last = err
		select {
		case <-ctx.Done():
			return Node{}, fmt.Errorf("wait for a master other than %s: %w (last: %v)", notID, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitSentinels waits until every Sentinel of t sees the master, the other
// Sentinels, and at least replicas replicas: the state in which a failover
// can happen. When they have not within 30 s (seen on a loaded machine: a
// Sentinel that kept seeing one other of two for half a minute), every
// Sentinel is told SENTINEL RESET, which drops what it knew of the others
// and the replicas and learns them again from the hellos, and they get 30
// s more.
func WaitSentinels(ctx context.Context, t Topology, replicas int) error {
	err := waitSentinels(ctx, t, replicas, 30*time.Second)
	if err == nil || ctx.Err() != nil {
		return err
	}
	for _, s := range t.Sentinels {
		c := sentinelClient(t.Auth, s)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = c.Reset(rctx, t.MasterName).Err()
		cancel()
		_ = c.Close()
	}
	if again := waitSentinels(ctx, t, replicas, 30*time.Second); again != nil {
		return fmt.Errorf("%w; after SENTINEL RESET: %w", err, again)
	}
	return nil
}

// waitSentinels is WaitSentinels' wait, bounded by limit.
func waitSentinels(ctx context.Context, t Topology, replicas int, limit time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for _, s := range t.Sentinels {
		c := sentinelClient(t.Auth, s)
		var last string
		for {
			m, err := c.Master(wctx, t.MasterName).Result()
			if err == nil {
				others, _ := strconv.Atoi(m["num-other-sentinels"])
				slaves, _ := strconv.Atoi(m["num-slaves"])
				flags := m["flags"]
				if others >= len(t.Sentinels)-1 && slaves >= replicas && !strings.Contains(flags, "down") {
					break
				}
				last = fmt.Sprintf("others=%d replicas=%d flags=%s", others, slaves, flags)
			} else {
				last = err.Error()
			}
			select {
			case <-wctx.Done():
				_ = c.Close()
				return fmt.Errorf("wait for sentinel %s to see %d sentinels and %d replicas: %w (last: %s)",
					s, len(t.Sentinels), replicas, wctx.Err(), last)
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = c.Close()
	}
	return nil
}

// Replicas returns the replica addresses one Sentinel reports for the master
// (SENTINEL REPLICAS), with their flags.
func Replicas(ctx context.Context, a Auth, sentinel, masterName string) (map[string]string, error) {
	c := sentinelClient(a, sentinel)
	defer c.Close()
	rs, err := c.Replicas(ctx, masterName).Result()
	if err != nil {
		return nil, fmt.Errorf("sentinel %s: replicas of %q: %w", sentinel, masterName, err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[net.JoinHostPort(r["ip"], r["port"])] = r["flags"]
	}
	return out, nil
}

// Failover asks one Sentinel to fail over now (SENTINEL FAILOVER).
func Failover(ctx context.Context, t Topology) error {
	if len(t.Sentinels) == 0 {
		return fmt.Errorf("failover %q: no sentinels", t.MasterName)
	}
	c := sentinelClient(t.Auth, t.Sentinels[0])
	defer c.Close()
	if err := c.Failover(ctx, t.MasterName).Err(); err != nil {
		return fmt.Errorf("sentinel failover %q: %w", t.MasterName, err)
	}
	return nil
}

// WaitConverged waits, bounded by ctx, until the Sentinels of t have
// settled after a failover: every Sentinel names the same master, none
// flags a failover in progress, and every Sentinel lists every other data
// node of t as a replica of it, up (flags neither down nor disconnected).
// It returns that master. Tests and scenarios ask this instead of assuming
// there was exactly one failover: on a loaded machine Sentinel may fail
// over twice.
func WaitConverged(ctx context.Context, t Topology) (Node, error) {
	var last string
	for {
		n, why := converged(ctx, t)
		if why == "" {
			return n, nil
		}
		last = why
		select {
		case <-ctx.Done():
			return Node{}, fmt.Errorf("wait for the sentinels of %q to converge: %w (last: %s)", t.MasterName, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// converged returns the master when t's Sentinels agree on it and on its
// replicas, or why not.
func converged(ctx context.Context, t Topology) (Node, string) {
	m, err := Master(ctx, t)
	if err != nil {
		return Node{}, err.Error()
	}
	for _, s := range t.Sentinels {
		c := sentinelClient(t.Auth, s)
		r, err := c.GetMasterAddrByName(ctx, t.MasterName).Result()
		info, ierr := c.Master(ctx, t.MasterName).Result()
		_ = c.Close()
		switch {
		case err != nil || ierr != nil:
			return Node{}, fmt.Sprintf("sentinel %s: %v", s, errors.Join(err, ierr))
		case len(r) != 2 || net.JoinHostPort(r[0], r[1]) != m.Addr:
			return Node{}, fmt.Sprintf("sentinel %s names master %v, the majority %s", s, r, m.Addr)
		case strings.Contains(info["flags"], "failover_in_progress"):
			return Node{}, fmt.Sprintf("sentinel %s: failover in progress", s)
		}
		rs, err := Replicas(ctx, t.Auth, s, t.MasterName)
		if err != nil {
			return Node{}, err.Error()
		}
		for _, n := range t.Data {
			if n.ID == m.ID {
				continue
			}
			if f, ok := rs[n.Addr]; !ok || strings.Contains(f, "down") || strings.Contains(f, "disconnected") {
				return Node{}, fmt.Sprintf("sentinel %s: replica %s of %s: flags %q", s, n.ID, m.ID, f)
			}
		}
	}
	return m, ""
}
