package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/chaos/nemesis"
)

// dataNodes are the nodes where a run's keys may live on e: the lock's
// nodes (the master, a cluster's masters, Redlock's masters) and the
// fenced resources' Redis.
func dataNodes(ctx context.Context, e env.Env) ([]string, error) {
	nodes, err := lockNodes(ctx, e.Topology())
	if err != nil {
		return nil, err
	}
	addrs := make([]string, 0, len(nodes)+1)
	for _, n := range nodes {
		addrs = append(addrs, n.Upstream)
	}
	if f := e.Topology().Fenced.Upstream; f != "" {
		addrs = append(addrs, f)
	}
	return addrs, nil
}

// ClearKeys deletes, on every node of e where a scenario keeps keys, each
// key that contains prefix (not followed by a digit: a seed's prefix is
// not a longer seed's): what a scenario with that Scenario.KeyPrefix left
// behind on a deployment that is not lockproof's (fence counters, fenced
// resources without a TTL, a lost lease). One SCAN MATCH *prefix* pass and
// one DEL per key, per node.
func ClearKeys(ctx context.Context, e env.Env, prefix string) error {
	if prefix == "" {
		return errors.New("clear keys: an empty prefix would match every key")
	}
	addrs, err := dataNodes(ctx, e)
	if err != nil {
		return fmt.Errorf("clear keys %s*: %w", prefix, err)
	}
	return (&nemesis.KeyLoss{Client: "cleanup", Key: prefix, Nodes: addrs, Auth: e.Topology().Auth}).Start(ctx)
}

// KeysHeld counts the keys already in the databases of e's nodes where a
// scenario keeps keys (DBSIZE), by address, leaving out those with none:
// a run on a database that holds other data shares it (a
// bring-your-own deployment is warned).
func KeysHeld(ctx context.Context, e env.Env) (map[string]int64, error) {
	addrs, err := dataNodes(ctx, e)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var errs []error
	for _, a := range addrs {
		c := env.AdminClient(e.Topology().Auth, a)
		n, err := c.DBSize(ctx).Result()
		errs = append(errs, err, c.Close())
		if n > 0 {
			out[a] = n
		}
	}
	return out, errors.Join(errs...)
}
