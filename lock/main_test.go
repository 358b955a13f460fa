package lock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
)

// TestMain starts one real redis-server for the package's Example. Without
// redis-server (and outside CI) the Example is skipped, like the tests.
func TestMain(m *testing.M) {
	flag.Parse()
	var p *redisproc.Process
	if _, err := redisproc.Binary(false); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p, err = redisproc.Start(ctx, redisproc.Config{})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "start redis for Example:", err)
			os.Exit(1)
		}
		os.Setenv("LOCKPROOF_EXAMPLE_REDIS", p.Addr)
	} else if redistest.InCI() {
		fmt.Fprintln(os.Stderr, "CI=true but", err)
		os.Exit(1)
	} else {
		_ = flag.Set("test.skip", "^Example")
	}
	code := m.Run()
	if p != nil {
		if err := p.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop redis:", err)
		}
	}
	os.Exit(code)
}
