package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/internal/rediscmd"
)

// Prepare is the one front door of a matrix run, which `lockproof run` and
// lockproof.Run both go through before Run. It checks up front that the
// environment eo asks for can run (env.Preflight: one error wrapping
// env.ErrUnavailable that names what is missing and how to install it,
// instead of one unknown verdict per scenario), settles cfg.Faults (each
// a catalogue fault that environment can run; none given: the default
// matrix, less the faults it cannot run, each returned in left with why),
// and sets cfg.Kind and cfg.Open (eo with each scenario's topology).
// go-redis's own log lines (reconnects, Sentinel switches) go to
// cfg.Logger from then on: a run is quiet unless its logger says
// otherwise. A bring-your-own deployment's passwords join cfg.Secrets,
// and the run's redaction of them (which Run goes on with) covers the
// log lines of the environments and of go-redis too.
func Prepare(ctx context.Context, cfg *Config, eo env.Options) (left []error, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if eo.BYO != nil {
		// Known before any environment opens: a deployment that refuses
		// the run still has them redacted from its errors.
		cfg.Secrets = append(slices.Clone(cfg.Secrets), eo.BYO.Auth.Secrets()...)
	}
	cfg.red = redact.New(cfg.Secrets...)
	cfg.Logger = slog.New(cfg.red.Handler(cfg.Logger.Handler()))
	if eo.Logger == nil {
		eo.Logger = cfg.Logger
	} else {
		eo.Logger = slog.New(cfg.red.Handler(eo.Logger.Handler()))
	}
	redis.SetLogger(rediscmd.SlogLogger{L: cfg.Logger})
	cfg.Topology = cmp.Or(cfg.Topology, contract.TopologySentinel)
	if !slices.Contains(contract.Topologies(), cfg.Topology) {
		return nil, fmt.Errorf("%w: topology %q: want one of %v", ErrBadConfig, cfg.Topology, contract.Topologies())
	}
	given := make([]chaos.Fault, len(cfg.Faults))
	for i, name := range cfg.Faults {
		f, ok := chaos.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w: fault %q: want one of %v", ErrBadConfig, name, chaos.Faults())
		}
		given[i] = f
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	kind, err := env.Preflight(pctx, eo)
	cancel()
	if err != nil {
		return nil, err
	}
	if contract.IsStore(cfg.Topology) {
		// A consensus store runs as lockproof's processes or containers
		// (its binaries on this machine: the images are built from them),
		// or is yours.
		if kind == env.BYO {
			if eo.BYO == nil {
				return nil, fmt.Errorf("%w: topology %s on the byo environment: no deployment given", ErrBadConfig, cfg.Topology)
			}
		} else if err := env.StoreMissing(cfg.Topology); err != nil {
			return nil, fmt.Errorf("the %s topology needs: %v (%s): %w", cfg.Topology, err, env.StoreInstallHint, env.ErrUnavailable)
		}
	}
	if kind == env.BYO && eo.BYO != nil {
		// A deployment of the other topology: said once, up front, not
		// once per scenario.
		if err := eo.BYO.Fits(chaos.On(env.Spec{}, cfg.Topology)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults, left = AvailableFaults(kind, cfg.Topology)
	} else {
		for _, f := range given {
			if err := f.Available(kind, cfg.Topology); err != nil {
				return nil, fmt.Errorf("%w: fault %q: %w", ErrBadConfig, f.Name, err)
			}
			if err := consented(f, kind, cfg.Topology, cfg.ChangeDeployment); err != nil {
				return nil, fmt.Errorf("%w: fault %q: %w", ErrBadConfig, f.Name, err)
			}
		}
		cfg.Faults = slices.Clone(cfg.Faults) // the caller's slice stays the caller's
	}
	cfg.Kind = kind
	eo.Kind = kind
	cfg.Open = func(ctx context.Context, spec env.Spec) (env.Env, error) {
		o := eo
		o.Spec = spec
		return env.Open(ctx, o)
	}
	return left, nil
}

// ErrNeedsConsent: the fault would change a bring-your-own deployment
// itself, and the run was not told it may (Config.ChangeDeployment).
var ErrNeedsConsent = errors.New("changes your deployment itself, not only the run's keys")

// consented says why f may not run on an environment of kind k: it would
// change a bring-your-own deployment (chaos.Fault.ChangesDeployment)
// without the user's consent.
func consented(f chaos.Fault, k env.Kind, topology string, consent bool) error {
	if k != env.BYO || !f.ChangesDeployment || consent {
		return nil
	}
	what := ""
	if f.Admin != nil {
		what = " (" + strings.Join(f.Admin(topology), "; ") + ")"
	}
	return fmt.Errorf("fault %s on the byo environment %w%s: name it and pass --yes (runner.Config.ChangeDeployment) to allow it", f.Name, ErrNeedsConsent, what)
}
