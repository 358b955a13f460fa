package env

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"

	"github.com/lockproof/lockproof/internal/redisproc"
)

// EnvVar is the environment variable with which the CLI and the tests let
// a user pick the environment kind (they read it and pass Options.Kind; this
// package reads no environment variable).
const EnvVar = "LOCKPROOF_ENV"

// Options say which environment Open makes.
type Options struct {
	// Kind to open; "" picks Process when redis-server is on PATH, else
	// Docker when Options.Docker is set and DockerCheck finds nothing
	// missing.
	Kind Kind
	// Spec is the topology (for BYO, only MasterName is used).
	Spec Spec
	// Docker makes the Docker environment; nil: Docker is not offered.
	Docker Constructor
	// DockerCheck says what Docker lacks to run an environment here (no
	// engine answers, no image to start: docker.Check); nil: assume
	// nothing when Docker is set.
	DockerCheck func(ctx context.Context) error
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
	if o.Docker == nil {
		return "", fmt.Errorf("no redis-server/redis-sentinel on PATH, and Docker not offered: %w", ErrUnavailable)
	}
	if o.DockerCheck == nil {
		return Docker, nil
	}
	// Say what Docker lacks: an engine that answers, or an image to
	// start (an engine that answers with no image was reported as "Docker
	// not reachable").
	if err := o.DockerCheck(ctx); err != nil {
		return "", fmt.Errorf("no redis-server/redis-sentinel on PATH, and Docker cannot run an environment here: %v: %w", err, ErrUnavailable)
	}
	return Docker, nil
}

// InstallHint says how to get what the environments need.
const InstallHint = "install redis-server and redis-sentinel, e.g. apt-get install -y redis-server redis-sentinel, or start Docker; lockproof sim needs neither (in-process nodes, virtual time)"

// Preflight returns the kind Open would make after checking, before
// anything runs, that it has what it needs: the process environment its
// binaries and a free loopback port, the Docker one what DockerCheck asks.
// One error (wrapping ErrUnavailable) names everything missing and how to
// install it, instead of one failure per scenario later.
func Preflight(ctx context.Context, o Options) (Kind, error) {
	kind, err := Choose(ctx, o)
	if err != nil {
		return "", fmt.Errorf("%w (%s)", err, InstallHint)
	}
	var missing []string
	switch kind {
	case Process:
		for _, sentinel := range []bool{false, true} {
			if _, err := redisproc.Binary(sentinel); err != nil {
				missing = append(missing, err.Error())
			}
		}
		if _, err := redisproc.FreePort(); err != nil {
			missing = append(missing, "no free loopback port: "+err.Error())
		}
	case BYO:
		// A deployment whose Toxiproxy does not answer runs nothing:
		// said once, up front (issue 62.8: every scenario failed, then
		// the run panicked closing the environment it never had).
		if o.BYO != nil {
			if err := o.BYO.ToxiproxyAnswers(ctx); err != nil {
				missing = append(missing, err.Error())
			}
		}
	case Docker:
		// Choose picked Docker on its own only after DockerCheck passed:
		// ask it again only for a Docker the caller named.
		if o.DockerCheck != nil && o.Kind == Docker {
			if err := o.DockerCheck(ctx); err != nil {
				missing = append(missing, err.Error())
			}
		}
	}
	if len(missing) > 0 {
		return kind, fmt.Errorf("the %s environment needs: %s: %w", kind, strings.Join(missing, "; "), ErrUnavailable)
	}
	return kind, nil
}

// Open makes the environment o asks for (see Options.Kind).
func Open(ctx context.Context, o Options) (Env, error) {
	k, err := Choose(ctx, o)
	if err != nil {
		return nil, err
	}
	switch k {
	case Process:
		if o.Spec.Store != "" {
			return nilIfErr(NewStore(ctx, o.Spec, o.Logger))
		}
		return nilIfErr(NewProcess(ctx, o.Spec, o.Logger))
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
		if err := o.BYO.Fits(o.Spec); err != nil {
			return nil, fmt.Errorf("kind byo: %w", err)
		}
		return nilIfErr(NewBYO(ctx, *o.BYO))
	}
}

// nilIfErr returns a constructor's environment as an Env: nil (not a nil
// pointer in a non-nil interface, whose Close panicked: issue 62.8) when
// it failed.
func nilIfErr[E Env](e E, err error) (Env, error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}
