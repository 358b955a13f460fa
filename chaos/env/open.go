package env

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
)

// EnvVar is the environment variable with which the CLI and the tests let
// a user pick the environment kind (they read it and pass Options.Kind; this
// package reads no environment variable).
const EnvVar = "LOCKPROOF_ENV"

// Options say which environment Open makes.
type Options struct {
	// Kind to open; "" picks Process when redis-server is on PATH, else
	// Docker when Options.Docker is set and DockerAvailable says Docker is
	// reachable.
	Kind Kind
	// Spec is the topology (for BYO, only MasterName is used).
	Spec Spec
	// Docker makes the Docker environment; nil: Docker is not offered.
	Docker Constructor
	// DockerAvailable reports whether Docker is reachable; nil: assume it is
	// when Docker is set.
	DockerAvailable func(ctx context.Context) bool
	// BYO describes the existing deployment for Kind BYO.
	BYO *BYOConfig
	// Logger receives progress; nil uses slog.Default().
	Logger *slog.Logger
}

// Choose returns the kind Open would make, or an error wrapping ErrUnavailable.
func Choose(ctx context.Context, o Options) (Kind, error) {
	k := o.Kind
	switch k {
	case Process, BYO:
		return k, nil
	case Docker:
		if o.Docker == nil {
			return "", fmt.Errorf("kind docker: no Docker constructor given (Options.Docker): %w", ErrUnavailable)
		}
		return k, nil
	case "":
	default:
		return "", fmt.Errorf("kind %q: want process, docker or byo", k)
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		if _, err := exec.LookPath("redis-sentinel"); err == nil {
			return Process, nil
		}
	}
	if o.Docker != nil && (o.DockerAvailable == nil || o.DockerAvailable(ctx)) {
		return Docker, nil
	}
	return "", fmt.Errorf("neither redis-server/redis-sentinel on PATH nor Docker reachable: %w", ErrUnavailable)
}

// Open makes the environment o asks for (see Options.Kind).
func Open(ctx context.Context, o Options) (Env, error) {
	k, err := Choose(ctx, o)
	if err != nil {
		return nil, err
	}
	switch k {
	case Process:
		return NewProcess(ctx, o.Spec, o.Logger)
	case Docker:
		e, err := o.Docker(ctx, o.Spec)
		if err != nil {
			return nil, fmt.Errorf("open docker environment: %w", err)
		}
		return e, nil
	default: // BYO
		if o.Spec.ReplicaClockBehind != 0 {
			return nil, fmt.Errorf("kind byo: the deployment's clocks are its own (Spec.ReplicaClockBehind): %w", ErrUnavailable)
		}
		if o.BYO == nil {
			return nil, fmt.Errorf("kind byo: no deployment given (Options.BYO): %w", ErrUnavailable)
		}
		return NewBYO(ctx, *o.BYO)
	}
}
