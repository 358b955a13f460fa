package env_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos/env"
)

// TestChooseSaysWhatDockerLacks: with no redis-server on PATH, an
// environment left to choose names what Docker lacks (here an image, with
// the engine answering), not "Docker not reachable"; without a check it
// takes Docker, and with Docker not offered it says so.
func TestChooseSaysWhatDockerLacks(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no redis-server, no redis-sentinel
	ctx := context.Background()
	docker := func(context.Context, env.Spec) (env.Env, error) { return nil, errors.New("not started here") }
	lacks := func(context.Context) error {
		return errors.New("a redis-server on PATH to build the local Redis image from, or LOCKPROOF_REDIS_IMAGE naming an image")
	}
	_, err := env.Choose(ctx, env.Options{Docker: docker, DockerCheck: lacks})
	if !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "LOCKPROOF_REDIS_IMAGE") || strings.Contains(err.Error(), "reachable") {
		t.Errorf("Docker without an image: %v; want what it lacks, wrapping ErrUnavailable", err)
	}
	if k, err := env.Choose(ctx, env.Options{Docker: docker}); err != nil || k != env.Docker {
		t.Errorf("Docker without a check: %q, %v; want docker", k, err)
	}
	if _, err := env.Choose(ctx, env.Options{}); !errors.Is(err, env.ErrUnavailable) || !strings.Contains(err.Error(), "Docker not offered") {
		t.Errorf("no Docker offered: %v", err)
	}
}
