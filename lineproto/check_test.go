package lineproto_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lineproto"
)

// TestCheck (issue 63.3): Check starts the process once and completes
// hello: a lock that answers passes without any deployment; one whose
// interpreter lacks a module fails with ErrCheck and its stderr; one that
// never answers fails within the context.
func TestCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lineproto.Check(ctx, lineproto.Config{Name: "t", Command: script(t, "done\n")}); err != nil {
		t.Fatalf("a lock that answers hello: %v", err)
	}

	// The shipped redis-py adapter dials Redis at hello: the check's
	// in-process Redis serves it.
	if err := lineproto.Check(ctx, lineproto.Config{Name: "redispy", Command: adapter(t)}); err != nil {
		t.Fatalf("the redis-py adapter: %v", err)
	}

	py, err := exec.LookPath("python3")
	if err != nil {
		if redistest.InCI() {
			t.Fatalf("CI=true but %v", err)
		}
		t.Skip(err)
	}
	p := filepath.Join(t.TempDir(), "adapter.py")
	if err := os.WriteFile(p, []byte("import no_such_module_lockproof\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = lineproto.Check(ctx, lineproto.Config{Name: "broken", Command: []string{py, p}})
	if !errors.Is(err, lineproto.ErrCheck) || !strings.Contains(err.Error(), "no_such_module_lockproof") {
		t.Fatalf("a lock that cannot start: %v; want ErrCheck with its stderr", err)
	}

	// A process that ignores hello's password is refused at its first
	// command to Redis: the check's acquire shows it, naming the password.
	deaf := script(t, `echo "{\"id\":$id,\"result\":\"fail\",\"error\":\"NOAUTH Authentication required.\"}"
done
`)
	err = lineproto.Check(ctx, lineproto.Config{Name: "deaf", Command: deaf})
	if !errors.Is(err, lineproto.ErrCheck) || !strings.Contains(err.Error(), "redis.password") {
		t.Fatalf("a lock that does not log in: %v; want ErrCheck naming hello's password", err)
	}

	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	err = lineproto.Check(short, lineproto.Config{Name: "mute", Command: []string{"sh", "-c", "sleep 30"}})
	if !errors.Is(err, lineproto.ErrCheck) {
		t.Fatalf("a lock that never answers: %v; want ErrCheck", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Check returned %v after a 500ms deadline", d)
	}
}
