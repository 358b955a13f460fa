package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/internal/proc"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Cleanup: closing the environment and removing what it (or an earlier run) left.

// PruneStale removes the containers and networks of environments whose
// owning process (LabelOwner) ran on this host and is gone: what a test
// binary killed by a panic or a timeout left behind, as no reaper runs. It
// returns how many containers and networks it removed.
func PruneStale(ctx context.Context) (int, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune: docker client: %w", err)
	}
	defer cli.Close()
	host, _ := os.Hostname()
	stale := func(labels map[string]string) bool {
		h, pid, ok := strings.Cut(labels[LabelOwner], "/")
		if !ok || h != host {
			return false
		}
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 || n == os.Getpid() {
			return false
		}
		return !proc.Alive(n)
	}
	f := make(client.Filters).Add("label", LabelEnv)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("prune: list containers: %w", err)
	}
	removed := 0
	var errs []error
	for _, c := range cs.Items {
		if !stale(c.Labels) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("prune: remove container %.12s: %w", c.ID, err))
			continue
		}
		removed++
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return removed, errors.Join(append(errs, fmt.Errorf("prune: list networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if !stale(n.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("prune: remove network %s: %w", n.Name, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// remove force-removes one container (running, paused or stopped) with its volumes.
func (e *Env) remove(ctx context.Context, id string) error {
	_, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	return nil
}

// Close implements env.Env: it force-removes every container of the
// environment (also any that carries its label but was not recorded, as after
// a start that failed half-way), then its network, and stops the Toxiproxy
// server. It is safe to call more than once; later calls return nil.
func (e *Env) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	nw := e.net
	e.mu.Unlock()

	var errs []error
	if e.cli != nil {
		errs = append(errs, e.removeAll(ctx)...)
	}
	if nw != nil {
		if err := nw.Remove(ctx); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", nw.Name, err))
		}
	}
	if e.toxi != nil {
		if err := e.toxi.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.cli != nil {
		_ = e.cli.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close docker environment %s: %w", e.ID, err)
	}
	return nil
}

// removeAll removes the recorded and the labelled containers, then lists
// the labelled ones again a few times, removing any that appear late (a
// create request the daemon finished after a start was cancelled).
func (e *Env) removeAll(ctx context.Context) []error {
	var errs []error
	ids, err := e.containerIDs(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for pass := 0; ; pass++ {
		failed := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { failed[i] = e.remove(ctx, id) })
		}
		wg.Wait()
		if err := errors.Join(failed...); err != nil {
			failed = []error{err}
		} else {
			failed = nil
		}
		if pass == 4 || ctx.Err() != nil {
			return append(errs, failed...)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if ids, err = listContainers(ctx, e.cli, e.ID); err != nil {
			return append(errs, err)
		}
		if len(ids) == 0 {
			return errs
		}
	}
}

// containerIDs lists the containers labelled with this environment's ID,
// plus those recorded (should the listing miss one).
func (e *Env) containerIDs(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	e.mu.Lock()
	for _, n := range e.sentinels {
		add(n.ctr.GetContainerID())
	}
	for _, n := range e.nodes {
		add(n.ctr.GetContainerID())
	}
	e.mu.Unlock()
	list, err := listContainers(ctx, e.cli, e.ID)
	for _, c := range list {
		add(c)
	}
	return ids, err
}

// Leftovers lists the IDs of all containers (running or not) and networks
// that carry LabelEnv, with the value envID when envID is not "": what Close
// left behind, or what a crashed run did.
func Leftovers(ctx context.Context, envID string) (containers, networks []string, err error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("leftovers: docker client: %w", err)
	}
	defer cli.Close()
	if containers, err = listContainers(ctx, cli, envID); err != nil {
		return nil, nil, err
	}
	res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", labelFilter(envID))})
	if err != nil {
		return nil, nil, fmt.Errorf("list networks labelled %s: %w", labelFilter(envID), err)
	}
	for _, n := range res.Items {
		networks = append(networks, n.ID)
	}
	return containers, networks, nil
}

func labelFilter(envID string) string {
	if envID == "" {
		return LabelEnv
	}
	return LabelEnv + "=" + envID
}

func listContainers(ctx context.Context, cli *testcontainers.DockerClient, envID string) ([]string, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelFilter(envID))})
	if err != nil {
		return nil, fmt.Errorf("list containers labelled %s: %w", labelFilter(envID), err)
	}
	ids := make([]string, 0, len(res.Items))
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids, nil
}
