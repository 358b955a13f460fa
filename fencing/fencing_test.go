package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/internal/redistest"
)

// flavour builds a fresh resource of one implementation.
type flavour struct {
	name string
	new  func(t testing.TB) fencing.Resource
}

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func fencedFlavours() []flavour {
	return []flavour{
		{"memory", func(t testing.TB) fencing.Resource { return fencing.NewMemory() }},
		{"redis", func(t testing.TB) fencing.Resource {
			r, err := fencing.NewRedis(redisClient(t), fencing.RedisOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}},
		{"redis-cluster", func(t testing.TB) fencing.Resource {
			cc, prefix := clusterClient(t)
			r, err := fencing.NewRedis(cc, fencing.RedisOptions{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}},
	}
}

func unfencedFlavours() []flavour {
	return []flavour{
		{"memory", func(t testing.TB) fencing.Resource { return fencing.NewUnfencedMemory() }},
		{"redis", func(t testing.TB) fencing.Resource {
			r, err := fencing.NewUnfencedRedis(redisClient(t), fencing.RedisOptions{Prefix: "u:"})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}},
		{"redis-cluster", func(t testing.TB) fencing.Resource {
			cc, prefix := clusterClient(t)
			r, err := fencing.NewUnfencedRedis(cc, fencing.RedisOptions{Prefix: "u" + prefix})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}},
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustRead(t *testing.T, r fencing.Resource, key string) fencing.Value {
	t.Helper()
	v, err := r.Read(ctx(t), key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return v
}

func TestFencedRule(t *testing.T) {
	type step struct {
		w     fencing.Write
		stale bool
	}
	cases := []struct {
		name  string
		steps []step
		want  fencing.Value
	}{
		{"first write accepted", []step{{fencing.Write{Token: 5, Owner: "a", Value: "x"}, false}},
			fencing.Value{Value: "x", Token: 5, Owner: "a", Written: true}},
		{"higher token accepted", []step{
			{fencing.Write{Token: 5, Owner: "a", Value: "x"}, false},
			{fencing.Write{Token: 6, Owner: "b", Value: "y"}, false}},
			fencing.Value{Value: "y", Token: 6, Owner: "b", Written: true}},
		{"lower token refused", []step{
			{fencing.Write{Token: 7, Owner: "b", Value: "y"}, false},
			{fencing.Write{Token: 6, Owner: "a", Value: "x"}, true}},
			fencing.Value{Value: "y", Token: 7, Owner: "b", Written: true}},
		{"lower token of same owner refused", []step{
			{fencing.Write{Token: 7, Owner: "a", Value: "y"}, false},
			{fencing.Write{Token: 6, Owner: "a", Value: "x"}, true}},
			fencing.Value{Value: "y", Token: 7, Owner: "a", Written: true}},
		{"same token other owner refused", []step{
			{fencing.Write{Token: 7, Owner: "a", Value: "y"}, false},
			{fencing.Write{Token: 7, Owner: "b", Value: "x"}, true}},
			fencing.Value{Value: "y", Token: 7, Owner: "a", Written: true}},
		{"same token same owner accepted", []step{
			{fencing.Write{Token: 7, Owner: "a", Value: "y"}, false},
			{fencing.Write{Token: 7, Owner: "a", Value: "z"}, false}},
			fencing.Value{Value: "z", Token: 7, Owner: "a", Written: true}},
		{"token zero is a token", []step{
			{fencing.Write{Token: 0, Owner: "a", Value: "y"}, false},
			{fencing.Write{Token: 0, Owner: "b", Value: "z"}, true}},
			fencing.Value{Value: "y", Token: 0, Owner: "a", Written: true}},
		{"tokens compared as numbers, not strings", []step{
			{fencing.Write{Token: 9, Owner: "a", Value: "9"}, false},
			{fencing.Write{Token: 10, Owner: "b", Value: "10"}, false},
			{fencing.Write{Token: 9, Owner: "a", Value: "late"}, true}},
			fencing.Value{Value: "10", Token: 10, Owner: "b", Written: true}},
		{"full uint64 range", []step{
			{fencing.Write{Token: 1<<64 - 2, Owner: "a", Value: "x"}, false},
			{fencing.Write{Token: 1<<64 - 1, Owner: "b", Value: "y"}, false},
			{fencing.Write{Token: 1<<64 - 2, Owner: "a", Value: "z"}, true}},
			fencing.Value{Value: "y", Token: 1<<64 - 1, Owner: "b", Written: true}},
	}
	for _, f := range fencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			for i, c := range cases {
				key := fmt.Sprintf("k%d", i)
				t.Run(c.name, func(t *testing.T) {
					for j, s := range c.steps {
						err := r.Write(ctx(t), key, s.w)
						if got := errors.Is(err, fencing.ErrStaleToken); got != s.stale || (!s.stale && err != nil) {
							t.Fatalf("step %d %+v: err %v, want stale=%v", j, s.w, err, s.stale)
						}
						if s.stale {
							var se *fencing.StaleError
							if !errors.As(err, &se) || se.Token != s.w.Token {
								t.Fatalf("step %d: want *StaleError for token %d, got %#v", j, s.w.Token, err)
							}
							if errors.Is(err, fencing.ErrUnknownOutcome) {
								t.Fatalf("step %d: stale error also unknown: %v", j, err)
							}
						}
					}
					if got := mustRead(t, r, key); got != c.want {
						t.Fatalf("read %+v, want %+v", got, c.want)
					}
				})
			}
		})
	}
}

// TestFencedReads: a fenced read is accepted under the write rule, raises
// the fence without changing the value, and a stale one changes nothing.
func TestFencedReads(t *testing.T) {
	type step struct {
		read  bool
		w     fencing.Write // for a read: Token and Owner
		stale bool
		want  string // value a read returns
	}
	rd := func(tok uint64, owner string, stale bool, want string) step {
		return step{read: true, w: fencing.Write{Token: tok, Owner: owner}, stale: stale, want: want}
	}
	wr := func(tok uint64, owner, val string, stale bool) step {
		return step{w: fencing.Write{Token: tok, Owner: owner, Value: val}, stale: stale}
	}
	cases := []struct {
		name  string
		steps []step
		want  fencing.Value
	}{
		// The paused-holder interleaving: A read under token 3, paused; B took
		// the lock (token 4) and read; A wakes and writes: refused, so B's
		// read-modify-write loses nothing.
		{"paused holder's late write refused after next holder read", []step{
			wr(2, "z", "v0", false),
			rd(3, "A", false, "v0"),
			rd(4, "B", false, "v0"),
			wr(3, "A", "A's", true),
			wr(4, "B", "B's", false)},
			fencing.Value{Value: "B's", Token: 4, Owner: "B", Written: true}},
		{"read of unwritten key sets the fence", []step{
			rd(5, "a", false, ""),
			wr(4, "b", "x", true),
			wr(5, "b", "x", true)},
			fencing.Value{Token: 5, Owner: "a"}},
		{"stale read refused and changes nothing", []step{
			wr(7, "b", "y", false),
			rd(6, "a", true, ""),
			rd(7, "a", true, "")},
			fencing.Value{Value: "y", Token: 7, Owner: "b", Written: true}},
		{"same token same owner read then write", []step{
			wr(7, "a", "y", false),
			rd(7, "a", false, "y"),
			wr(7, "a", "z", false),
			rd(7, "a", false, "z")},
			fencing.Value{Value: "z", Token: 7, Owner: "a", Written: true}},
		{"higher read raises fence, value kept", []step{
			wr(9, "a", "9", false),
			rd(10, "b", false, "9")},
			fencing.Value{Value: "9", Token: 10, Owner: "b", Written: true}},
		{"full uint64 range", []step{
			rd(1<<64-1, "b", false, ""),
			rd(1<<64-2, "a", true, "")},
			fencing.Value{Token: 1<<64 - 1, Owner: "b"}},
	}
	for _, f := range fencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			for i, c := range cases {
				key := fmt.Sprintf("k%d", i)
				t.Run(c.name, func(t *testing.T) {
					for j, s := range c.steps {
						var err error
						if s.read {
							var v fencing.Value
							v, err = r.ReadFenced(ctx(t), key, s.w.Token, s.w.Owner)
							if err == nil && (v.Value != s.want || v.Token != s.w.Token || v.Owner != s.w.Owner) {
								t.Fatalf("step %d: read with token %d by %q = %+v, want value %q and fence raised to it",
									j, s.w.Token, s.w.Owner, v, s.want)
							}
						} else {
							err = r.Write(ctx(t), key, s.w)
						}
						if got := errors.Is(err, fencing.ErrStaleToken); got != s.stale || (!s.stale && err != nil) {
							t.Fatalf("step %d (read %v) %+v: err %v, want stale=%v", j, s.read, s.w, err, s.stale)
						}
						var se *fencing.StaleError
						if s.stale && (!errors.As(err, &se) || se.Token != s.w.Token || (se.Op == "read") != s.read) {
							t.Fatalf("step %d: want *StaleError for %v token %d, got %#v", j, s.read, s.w.Token, err)
						}
					}
					if got := mustRead(t, r, key); got != c.want {
						t.Fatalf("read %+v, want %+v", got, c.want)
					}
				})
			}
		})
	}
}

// TestUnfencedReadFencedIgnoresTokens: an unfenced resource's fenced read
// is a plain read: a stale token is accepted and sets no fence.
func TestUnfencedReadFencedIgnoresTokens(t *testing.T) {
	for _, f := range unfencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			if err := r.Write(ctx(t), "k", fencing.Write{Token: 9, Owner: "a", Value: "1"}); err != nil {
				t.Fatal(err)
			}
			want := fencing.Value{Value: "1", Token: 9, Owner: "a", Written: true}
			for _, tok := range []uint64{3, 10} {
				v, err := r.ReadFenced(ctx(t), "k", tok, "b")
				if err != nil || v != want {
					t.Fatalf("ReadFenced token %d = %+v, %v; want %+v", tok, v, err, want)
				}
			}
			if err := r.Write(ctx(t), "k", fencing.Write{Token: 4, Owner: "c", Value: "2"}); err != nil {
				t.Fatalf("write after reads: %v", err)
			}
		})
	}
}

func TestReadNeverWritten(t *testing.T) {
	for _, f := range append(fencedFlavours(), unfencedFlavours()...) {
		t.Run(f.name, func(t *testing.T) {
			if got := mustRead(t, f.new(t), "nothing"); got != (fencing.Value{}) {
				t.Fatalf("read of unwritten key = %+v, want zero", got)
			}
		})
	}
}

func TestKeysAreIndependent(t *testing.T) {
	for _, f := range fencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			if err := r.Write(ctx(t), "a", fencing.Write{Token: 10, Owner: "x", Value: "1"}); err != nil {
				t.Fatal(err)
			}
			if err := r.Write(ctx(t), "b", fencing.Write{Token: 1, Owner: "y", Value: "2"}); err != nil {
				t.Fatalf("low token on another key refused: %v", err)
			}
		})
	}
}

func TestUnfencedAcceptsEverything(t *testing.T) {
	for _, f := range unfencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			writes := []fencing.Write{
				{Token: 9, Owner: "a", Value: "1"},
				{Token: 3, Owner: "b", Value: "2"}, // stale: accepted anyway
				{Token: 3, Owner: "c", Value: "3"}, // same token other owner
				{NoToken: true, Token: 99, Value: "4"},
			}
			for _, w := range writes {
				if err := r.Write(ctx(t), "k", w); err != nil {
					t.Fatalf("write %+v: %v", w, err)
				}
				want := fencing.Value{Value: w.Value, Token: w.Token, Owner: w.Owner, Written: true}
				if w.NoToken {
					want.Token = 0
				}
				if got := mustRead(t, r, "k"); got != want {
					t.Fatalf("after %+v read %+v, want %+v", w, got, want)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	for _, f := range append(fencedFlavours(), unfencedFlavours()...) {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			if err := r.Write(ctx(t), "", fencing.Write{Token: 1, Owner: "a"}); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("empty key write: %v, want ErrInvalid", err)
			}
			if _, err := r.Read(ctx(t), ""); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("empty key read: %v, want ErrInvalid", err)
			}
			if _, err := r.ReadFenced(ctx(t), "", 1, "a"); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("empty key fenced read: %v, want ErrInvalid", err)
			}
		})
	}
	for _, f := range fencedFlavours() {
		t.Run(f.name+"/fenced", func(t *testing.T) {
			r := f.new(t)
			if err := r.Write(ctx(t), "k", fencing.Write{Token: 1, Value: "v"}); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("empty owner: %v, want ErrInvalid", err)
			}
			if err := r.Write(ctx(t), "k", fencing.Write{NoToken: true, Owner: "a"}); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("token-less write to fenced resource: %v, want ErrInvalid", err)
			}
			if _, err := r.ReadFenced(ctx(t), "k", 1, ""); !errors.Is(err, fencing.ErrInvalid) {
				t.Errorf("fenced read without owner: %v, want ErrInvalid", err)
			}
			if got := mustRead(t, r, "k"); got != (fencing.Value{}) {
				t.Errorf("invalid writes left %+v", got)
			}
		})
	}
	if _, err := fencing.NewRedis(nil, fencing.RedisOptions{}); !errors.Is(err, fencing.ErrInvalid) {
		t.Errorf("NewRedis(nil): %v, want ErrInvalid", err)
	}
	if _, err := fencing.NewUnfencedRedis(nil, fencing.RedisOptions{}); !errors.Is(err, fencing.ErrInvalid) {
		t.Errorf("NewUnfencedRedis(nil): %v, want ErrInvalid", err)
	}
}

func TestContextDoneBeforeCall(t *testing.T) {
	for _, f := range fencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			c, cancel := context.WithCancel(context.Background())
			cancel()
			err := r.Write(c, "k", fencing.Write{Token: 1, Owner: "a", Value: "v"})
			if !errors.Is(err, context.Canceled) || errors.Is(err, fencing.ErrUnknownOutcome) {
				t.Fatalf("write with done ctx: %v, want context.Canceled, not unknown", err)
			}
			_, err = r.ReadFenced(c, "k", 2, "a")
			if !errors.Is(err, context.Canceled) || errors.Is(err, fencing.ErrUnknownOutcome) {
				t.Fatalf("fenced read with done ctx: %v, want context.Canceled, not unknown", err)
			}
			if got := mustRead(t, r, "k"); got != (fencing.Value{}) {
				t.Fatalf("ops with done ctx took effect: %+v", got)
			}
		})
	}
}

// TestConcurrentWriters: writers with distinct tokens race (run with -race);
// the highest token is accepted, every refusal is a stale-token one, and the
// resource ends holding the highest token's write.
func TestConcurrentWriters(t *testing.T) {
	const writers, perWriter = 8, 40
	for _, f := range fencedFlavours() {
		t.Run(f.name, func(t *testing.T) {
			r := f.new(t)
			var (
				mu       sync.Mutex
				accepted []uint64
				wg       sync.WaitGroup
				errs     = make(chan error, writers*perWriter)
			)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						// Interleaved tokens: writer w writes w, w+writers, ... in order,
						// so every writer's stream increases but streams overlap.
						tok := uint64(i*writers + w + 1)
						err := r.Write(ctx(t), "shared", fencing.Write{Token: tok, Owner: fmt.Sprint("w", w), Value: fmt.Sprint(tok)})
						switch {
						case err == nil:
							mu.Lock()
							accepted = append(accepted, tok)
							mu.Unlock()
						case errors.Is(err, fencing.ErrStaleToken):
						default:
							errs <- err
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("unexpected write error: %v", err)
			}
			var max uint64
			for _, a := range accepted {
				max = max2(max, a)
			}
			const top = writers * perWriter
			if max != top {
				t.Fatalf("highest token %d was not accepted (max accepted %d)", top, max)
			}
			got := mustRead(t, r, "shared")
			if got.Token != top || got.Value != fmt.Sprint(top) || got.Owner != fmt.Sprint("w", writers-1) {
				t.Fatalf("final %+v, want token %d from w%d", got, top, writers-1)
			}
		})
	}
}

func max2(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestRedisPausedIsUnknown: a server that stops answering makes the write's
// outcome unknown, never a stale refusal.
//
// Each call returns within its ctx, with go-redis clients that honour ctx
// deadlines and with those that do not (ContextTimeoutEnabled false, a 10s
// read timeout here): review defect 9, the scripts went straight to the
// client and waited out its read timeout.
func TestRedisPausedIsUnknown(t *testing.T) {
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) { testRedisPausedIsUnknown(t, ctxTimeouts) })
	}
}

func testRedisPausedIsUnknown(t *testing.T, ctxTimeouts bool) {
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: ctxTimeouts, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	t.Cleanup(func() { _ = p.Resume() }) // runs before the server's stop, even on failure
	within := func(what string, start time.Time) {
		// 200ms asked; 10s is the read timeout a call that ignored it waits.
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v with a 200ms ctx", what, d)
		}
	}
	for _, mk := range []func(redis.UniversalClient, fencing.RedisOptions) (*fencing.Redis, error){fencing.NewRedis, fencing.NewUnfencedRedis} {
		r, err := mk(rdb, fencing.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Write(ctx(t), "k", fencing.Write{Token: 1, Owner: "a", Value: "v"}); err != nil {
			t.Fatal(err)
		}
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		err = r.Write(c, "k", fencing.Write{Token: 2, Owner: "a", Value: "w"})
		cancel()
		within("write", start)
		if !errors.Is(err, fencing.ErrUnknownOutcome) || errors.Is(err, fencing.ErrStaleToken) {
			t.Errorf("write to paused server: %v, want ErrUnknownOutcome and not ErrStaleToken", err)
		}
		c, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
		start = time.Now()
		_, err = r.Read(c, "k")
		cancel()
		within("read", start)
		if !errors.Is(err, fencing.ErrUnknownOutcome) {
			t.Errorf("read from paused server: %v, want ErrUnknownOutcome", err)
		}
		c, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
		start = time.Now()
		_, err = r.ReadFenced(c, "k", 3, "a")
		cancel()
		within("fenced read", start)
		if !errors.Is(err, fencing.ErrUnknownOutcome) || errors.Is(err, fencing.ErrStaleToken) {
			t.Errorf("fenced read from paused server: %v, want ErrUnknownOutcome and not ErrStaleToken", err)
		}
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisErrorReplyIsDefinite: an error reply (here WRONGTYPE) means the
// write did not happen; it is neither stale nor unknown.
func TestRedisErrorReplyIsDefinite(t *testing.T) {
	rdb := redisClient(t)
	if err := rdb.Set(ctx(t), "fencing:k", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := fencing.NewRedis(rdb, fencing.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Write(ctx(t), "k", fencing.Write{Token: 1, Owner: "a", Value: "v"})
	if err == nil || errors.Is(err, fencing.ErrUnknownOutcome) || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("write over a wrong type: %v, want a definite error", err)
	}
}

// TestRedisClosedClientIsDefinite: a closed client sends nothing.
func TestRedisClosedClientIsDefinite(t *testing.T) {
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	r, err := fencing.NewRedis(rdb, fencing.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	err = r.Write(ctx(t), "k", fencing.Write{Token: 1, Owner: "a", Value: "v"})
	if err == nil || errors.Is(err, fencing.ErrUnknownOutcome) {
		t.Fatalf("write through closed client: %v, want a definite error", err)
	}
}
