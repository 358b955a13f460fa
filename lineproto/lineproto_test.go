package lineproto_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lineproto"
	"github.com/lockproof/lockproof/locker"
)

// open starts cmd as client c1's lock on a real redis-server.
func open(t *testing.T, cmd []string) (locker.Locker, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l, err := lineproto.Open(lineproto.Config{Name: "t", Command: cmd}, locker.Deps{Redis: rdb, Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, rdb
}

// adapter is the command of the shipped redis-py adapter.
func adapter(t testing.TB) []string {
	t.Helper()
	py := redistest.Python(t)
	_, file, _, _ := runtime.Caller(0)
	return []string{py, filepath.Join(filepath.Dir(file), "..", "examples", "redispy", "lockproof_redispy.py")}
}

// TestRedisPyLock drives redis-py's Lock through the protocol on a real
// Redis: each outcome maps to package locker's errors, and the keys are
// the lock's own, under the prefix.
func TestRedisPyLock(t *testing.T) {
	l, rdb := open(t, adapter(t))
	ctx := context.Background()
	w, ok := l.(locker.Waiter)
	if !ok {
		t.Fatal("redis-py's Lock has a blocking acquire; the Locker is no Waiter")
	}
	start := time.Now()
	le, err := l.TryAcquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	if ttl := rdb.PTTL(ctx, "p:k").Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("PTTL p:k = %v after acquire for 1s", ttl)
	}
	if _, ok := le.Fence(); ok {
		t.Error("redis-py's Lock has no fence")
	}
	cl, ok := le.(locker.Claimer)
	if !ok {
		t.Fatal("the adapter claims validity (hello claims); its lease is no Claimer")
	}
	// The SET was sent after the call started and before it returned: the
	// claim ends no later than the return plus the TTL.
	if v := cl.ValidUntil(); v.After(returned.Add(time.Second)) || v.Before(start.Add(500*time.Millisecond)) {
		t.Errorf("ValidUntil %v after the call's start (returned after %v); want within the TTL from the SET", v.Sub(start), returned.Sub(start))
	}
	if _, err := l.TryAcquire(ctx, "k", time.Second); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("second acquire: %v; want ErrNotAcquired", err)
	}
	if err := le.Renew(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, "p:k").Val(); ttl <= 2*time.Second {
		t.Fatalf("PTTL p:k = %v after renew for 3s", ttl)
	}
	if v := time.Until(cl.ValidUntil()); v <= 2*time.Second || v > 3*time.Second {
		t.Errorf("ValidUntil in %v after renew for 3s", v)
	}
	if _, err := le.(locker.Reentrant).Reenter(ctx, time.Second); !errors.Is(err, locker.ErrUnsupported) {
		t.Errorf("reenter: %v; want ErrUnsupported (hello lists no reenter)", err)
	}
	// A blocking acquire waits for the release.
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		le2, err := w.Acquire(wctx, "k", time.Second)
		if err == nil {
			err = le2.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("blocking acquire after the release: %v", err)
	}
	if !cl.ValidUntil().IsZero() {
		t.Error("a released lease still claims validity")
	}
	if err := le.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second release: %v; want ErrNotHeld", err)
	}
	// A blocking acquire whose deadline passes while the key is held holds
	// nothing: fail, not unknown.
	if err := rdb.Set(ctx, "p:k", "other", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := w.Acquire(wctx, "k", time.Second); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("blocking acquire past its deadline: %v; want ErrNotAcquired", err)
	}
	// A token-checked release refuses a key another owner holds.
	rdb.Del(ctx, "p:k")
	le3, err := l.TryAcquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, "p:k", "other", 5*time.Second)
	if err := le3.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("release of a key another owner took: %v; want ErrNotHeld", err)
	}
	if v := rdb.Get(ctx, "p:k").Val(); v != "other" {
		t.Fatalf("the refused release changed the key: %q", v)
	}
	// A release whose outcome is unknown (its context ended) leaves the
	// lease claiming nothing: it may have freed the key.
	le4, err := l.TryAcquire(ctx, "k2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := le4.Release(cctx); err == nil {
		t.Fatal("a release with a canceled context succeeded")
	}
	if v := le4.(locker.Claimer).ValidUntil(); !v.IsZero() {
		t.Errorf("after a release of unknown outcome the lease still claims validity until %v", v)
	}
	if p, ok := l.(locker.Process); !ok || p.Pid() == 0 {
		t.Fatal("the Locker does not say its process (locker.Process)")
	}
	ov, ok := l.(interface {
		Overhead() (int, time.Duration, time.Duration, time.Duration)
	})
	if !ok {
		t.Fatal("the Locker does not measure the protocol's overhead")
	}
	if n, p50, _, _ := ov.Overhead(); n < 10 || p50 <= 0 {
		t.Errorf("overhead: %d calls, p50 %v; want every call measured", n, p50)
	}
}

// script writes a fake lock process (sh) to a file and returns its command.
func script(t *testing.T, body string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lock.sh")
	if err := os.WriteFile(p, []byte(fakeHead+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"sh", p}
}

// fakeHead answers hello and the pings; the body handles the rest ($id,
// $op, $line).
const fakeHead = `
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  op=$(printf '%s' "$line" | sed 's/.*"op":"\([a-z]*\)".*/\1/')
  case $op in
  hello) echo "{\"id\":$id,\"result\":\"ok\",\"version\":1,\"ops\":[\"acquire\",\"release\"]}"; continue;;
  ping|close) echo "{\"id\":$id,\"result\":\"ok\"}"; continue;;
  esac
`

// TestMalformedLine: a line that breaks the protocol is an error naming
// the line; the call it answered is unknown, and every later call fails
// with it (locker.ErrInvalid: the workload stops there).
func TestMalformedLine(t *testing.T) {
	l, _ := open(t, script(t, `  echo "not json at all"
done
`))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := l.TryAcquire(ctx, "k", time.Second)
	var pe *lineproto.ErrProtocol
	if !errors.As(err, &pe) || !errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("acquire answered by a malformed line: %v; want unknown, with an ErrProtocol", err)
	}
	if pe.Line != 7 || !strings.Contains(pe.Error(), "stdout line 7") || !strings.Contains(pe.Error(), "not json at all") {
		t.Errorf("error %q: want it to name stdout line 7 (hello, 5 pings, then this) and quote it", pe.Error())
	}
	if _, err := l.TryAcquire(ctx, "k", time.Second); !errors.Is(err, locker.ErrInvalid) || !errors.As(err, &pe) {
		t.Fatalf("a call after the protocol broke: %v; want ErrInvalid with the ErrProtocol", err)
	}
}

// TestMalformedLineRedacted: a bad line that quotes the hello request
// is quoted in the error with its password redacted before the line is
// cut to 200 bytes: cut first, the part of the password before the cut
// would be left for the run to write (a run's redaction knows the whole
// password only).
func TestMalformedLineRedacted(t *testing.T) {
	pw := "lp-proto-" + strings.Repeat("0123456789abcdef", 9)
	redistest.Require(t, false)
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	srv, err := redisproc.Start(sctx, redisproc.Config{Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: pw, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	p := filepath.Join(t.TempDir(), "lock.sh")
	body := `
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  op=$(printf '%s' "$line" | sed 's/.*"op":"\([a-z]*\)".*/\1/')
  case $op in
  hello) hello=$line; echo "{\"id\":$id,\"result\":\"ok\",\"version\":1,\"ops\":[\"acquire\",\"release\"]}";;
  ping|close) echo "{\"id\":$id,\"result\":\"ok\"}";;
  *) echo "I was told: $hello";;
  esac
done
`
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := lineproto.Open(lineproto.Config{Name: "t", Command: []string{"sh", p}}, locker.Deps{Redis: rdb, Prefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = l.TryAcquire(ctx, "k", time.Second)
	var pe *lineproto.ErrProtocol
	if !errors.As(err, &pe) {
		t.Fatalf("acquire answered by a malformed line: %v; want an ErrProtocol", err)
	}
	if strings.Contains(err.Error(), pw[:8]) || !strings.Contains(pe.Text, "[redacted]") || !strings.HasPrefix(pe.Text, "I was told: {") {
		t.Errorf("error %q: want the line quoted, its password redacted", err)
	}
}

// TestProcessDies: a process that dies mid-call leaves that call unknown
// (it may have acted), and a call after its death surely did nothing.
func TestProcessDies(t *testing.T) {
	l, _ := open(t, script(t, `  exit 3
done
`))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := l.TryAcquire(ctx, "k", time.Second)
	if !errors.Is(err, locker.ErrUnknownOutcome) {
		t.Fatalf("acquire during which the process died: %v; want ErrUnknownOutcome", err)
	}
	_, err = l.TryAcquire(ctx, "k", time.Second)
	if err == nil || errors.Is(err, locker.ErrUnknownOutcome) || errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("acquire after the process died: %v; want a plain error (surely no effect) saying it exited", err)
	}
	if l.(locker.Process).Pid() != 0 {
		t.Error("Pid of an exited process is not 0")
	}
}

// TestSilentProcess: a process that stops answering leaves the call
// unknown when its context ends, and the call returns then.
func TestSilentProcess(t *testing.T) {
	l, _ := open(t, script(t, `  :
done
`))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := l.TryAcquire(ctx, "k", time.Second)
	if !errors.Is(err, locker.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire unanswered: %v; want unknown with the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the call returned %v after a 300ms deadline", d)
	}
}

// TestHelloRefused: a process that speaks another version, or has no
// acquire, is refused at Open with what it said.
func TestHelloRefused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	for _, tc := range []struct{ reply, want string }{
		{`{"id":1,"result":"ok","version":3,"ops":["acquire"]}`, "version 3"},
		{`{"id":1,"result":"ok","version":1,"ops":["acquire"],"modes":["read","write"]}`, "version 2's"},
		{`{"id":1,"result":"ok","version":2,"ops":["acquire"],"modes":["read"]}`, `modes ["read"]`},
		{`{"id":1,"result":"ok","version":2,"ops":["acquire"],"modes":["permits"]}`, "capacity 0"},
		{`{"id":1,"result":"ok","version":2,"ops":["acquire"],"modes":["read","write"],"capacity":2}`, "capacity on a read-write lock"},
		{`{"id":1,"result":"ok","version":2,"ops":["acquire"],"capacity":2}`, "capacity without modes"},
		{`{"id":1,"result":"ok","version":1,"ops":["release"]}`, `must have "acquire"`},
		{`{"id":1,"result":"ok","version":1,"ops":["acquire","frobnicate"]}`, `unknown op "frobnicate"`},
	} {
		p := filepath.Join(t.TempDir(), "lock.sh")
		if err := os.WriteFile(p, []byte("read -r line; echo '"+tc.reply+"'; echo oops >&2; sleep 5\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := lineproto.Open(lineproto.Config{Name: "t", Command: []string{"sh", p}}, locker.Deps{Redis: rdb})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hello %s: Open: %v; want an error saying %s", tc.reply, err, tc.want)
		}
	}
}

// TestLockProcessEnvironment (issue 62.11): the lock's process gets the
// variables docs/LINEPROTO.md lists (PATH, HOME, LANG, LC_*, TMPDIR, ...)
// and no other of the harness's: not LOCKPROOF_SENTINEL_PASSWORD, not
// any secret of the caller's environment.
func TestLockProcessEnvironment(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	t.Setenv("LOCKPROOF_SENTINEL_PASSWORD", "sentinel-secret-7f3a")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-91c2")
	t.Setenv("LC_TIME", "C")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	envFile := filepath.Join(dir, "env.txt")
	p := filepath.Join(dir, "lock.sh")
	script := "env > '" + envFile + "'; read -r line; echo '{\"id\":1,\"result\":\"ok\",\"version\":2,\"ops\":[\"acquire\"]}'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _ = lineproto.Open(lineproto.Config{Name: "t", Command: []string{"sh", p}}, locker.Deps{Redis: rdb})
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, secret := range []string{"LOCKPROOF_SENTINEL_PASSWORD", "sentinel-secret-7f3a", "AWS_SECRET_ACCESS_KEY"} {
		if strings.Contains(got, secret) {
			t.Errorf("the lock's process got %s; its environment:\n%s", secret, got)
		}
	}
	for _, want := range []string{"PATH=" + os.Getenv("PATH"), "LC_TIME=C", "LANG=C.UTF-8", "TMPDIR=" + dir} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the lock's process lacks %s; its environment:\n%s", want, got)
		}
	}
}

// TestOverheadExcludesHello (issue 63.10): the protocol overhead -v logs
// is the calls' round trips, not hello's, which waits out the process's
// start-up (an interpreter's imports).
func TestOverheadExcludesHello(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock.sh")
	if err := os.WriteFile(p, []byte("sleep 0.4\n"+fakeHead+"  :\ndone\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, _ := open(t, []string{"sh", p})
	n, _, _, mx := l.(interface {
		Overhead() (int, time.Duration, time.Duration, time.Duration)
	}).Overhead()
	if n != 5 || mx >= 300*time.Millisecond {
		t.Errorf("overhead after Open: %d calls, max %v; want the 5 pings alone, not hello's 400 ms start-up", n, mx)
	}
}

// TestModedLock (version 2): a process whose hello names modes is a
// locker.Moded; each acquire carries the mode (and permits) asked for,
// TryAcquire an exclusive hold (every permit), and a permit's lease is
// not reentrant.
func TestModedLock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	seen := filepath.Join(t.TempDir(), "requests")
	p := filepath.Join(t.TempDir(), "lock.sh")
	body := `n=0
while IFS= read -r line; do
  printf '%s\n' "$line" >> ` + seen + `
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  op=$(printf '%s' "$line" | sed 's/.*"op":"\([a-z]*\)".*/\1/')
  case $op in
  hello) echo "{\"id\":$id,\"result\":\"ok\",\"version\":2,\"ops\":[\"acquire\",\"release\",\"reenter\"],\"modes\":[\"permits\"],\"capacity\":3}";;
  acquire) n=$((n+1)); echo "{\"id\":$id,\"result\":\"ok\",\"lease\":$n}";;
  *) echo "{\"id\":$id,\"result\":\"ok\"}";;
  esac
done
`
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := lineproto.Open(lineproto.Config{Name: "sem", Command: []string{"sh", p}}, locker.Deps{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	md, ok := l.(locker.Moded)
	if !ok || md.Capacity() != 3 || len(md.Modes()) != 1 || md.Modes()[0] != locker.ModePermits {
		t.Fatalf("Open: %T (moded %v), want a semaphore of 3", l, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	two, err := md.AcquireMode(ctx, "k", time.Second, locker.ModePermits, 2, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := two.(locker.Reentrant); ok {
		t.Error("a permit's lease is reentrant")
	}
	if _, err := l.TryAcquire(ctx, "k", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := md.AcquireMode(ctx, "k", time.Second, locker.ModeRead, 1, false, nil); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("a read of a semaphore: %v, want ErrInvalid", err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{`"version":2`, `"mode":"permits","permits":2`, `"mode":"permits","permits":3`} {
		if !strings.Contains(got, want) {
			t.Errorf("requests lack %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"mode":"read"`) {
		t.Errorf("a read was sent to a semaphore:\n%s", got)
	}
}
