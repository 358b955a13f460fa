package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Faults on nodes: pause, resume, kill, restart (env.Env).

// state returns the container state of a node.
func (e *Env) state(ctx context.Context, n *node) (*container.State, error) {
	res, err := e.cli.ContainerInspect(ctx, n.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", n.ID, err)
	}
	if res.Container.State == nil {
		return nil, fmt.Errorf("inspect %s: no state", n.ID)
	}
	return res.Container.State, nil
}

// Pause implements env.Env: docker pause (the cgroup freezer) of the node's
// container: it keeps its connections but answers nothing until Resume.
func (e *Env) Pause(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	if _, err := e.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", nodeID, err)
	}
	return nil
}

// Resume implements env.Env: docker unpause.
func (e *Env) Resume(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if _, err := e.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("resume %s: %w", nodeID, err)
	}
	return nil
}

// Kill implements env.Env: docker kill -s KILL (a paused container is
// unpaused first, as Docker refuses to kill it), then waits until the
// container has stopped.
func (e *Env) Kill(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	st, err := e.state(ctx, n)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if !st.Running {
		return fmt.Errorf("kill %s: not running (%s)", nodeID, st.Status)
	}
	if st.Paused {
		if err := e.Resume(ctx, nodeID); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
	}
	if _, err := e.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", nodeID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		st, err := e.state(wctx, n)
		if err == nil && !st.Running {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("kill %s: still running: %w (last: %v)", nodeID, wctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restart implements env.Env: docker start of the killed container, with the
// same command line (announce options included), the same published port
// and an empty tmpfs for data; it waits until the node answers PING.
func (e *Env) Restart(ctx context.Context, nodeID string) error {
	n, err := e.node(nodeID)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	st, err := e.state(ctx, n)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if st.Running {
		return fmt.Errorf("restart %s: still running (kill it first)", nodeID)
	}
	if _, err := e.cli.ContainerStart(ctx, n.ctr.GetContainerID(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("restart %s: %w", nodeID, err)
	}
	if err := e.waitReady(ctx, n); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}
