package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// TestStepsDeclareEveryShare: each share a step declares is a share of
// the Mix, and every share of the Mix is declared by a step: a share no
// step draws would be a --mix setting that changes nothing.
func TestStepsDeclareEveryShare(t *testing.T) {
	var m Mix
	declared := map[string]string{}
	for _, st := range sectionSteps() {
		for _, d := range st.draws {
			if !slices.ContainsFunc(m.shares(), func(sh share) bool { return sh.name == d }) {
				t.Errorf("step %s declares %q, not a share of the Mix (%s)", st.name, d, m.String())
			}
			declared[d] = st.name
		}
	}
	for _, sh := range m.shares() {
		if _, ok := declared[sh.name]; !ok {
			t.Errorf("Mix share %s: no step declares it", sh.name)
		}
	}
}

// TestStepsReadTheMixThroughUses: no code of the package reads a share of
// a section's Mix but through section.uses (a &s.mix.Share argument),
// which TestStepsDrawWhatTheyDeclare watches: a read around it would
// escape that test.
func TestStepsReadTheMixThroughUses(t *testing.T) {
	around := regexp.MustCompile(`(^|[^&\w.])(\w+\.)?mix\.[A-Z]\w*`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "//"); around.MatchString(code) {
				t.Errorf("%s:%d: a share of the Mix read around section.uses: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestStepsDrawWhatTheyDeclare runs sections on a lock of the optional
// kinds whose sections read shares (drawLock) under mixes that between them make every step read
// every share it can: a step that reads a share it does not declare, or
// reads its shares out of their declared order, fails; so does a share
// that no step read in any of them. It also states the order in which a
// section draws from the client's seeded streams: the saved seeds
// replay only while it stays as it is, so a change to it shows here
// first (and then the simulation's saved findings must be saved again).
func TestStepsDrawWhatTheyDeclare(t *testing.T) {
	readAny := map[string]bool{}
	all := Mix{Blocking: 1, Cancel: 1, Reenter: 1, Renew: 1, RushRelease: 1, Owner: 1, Context: 1, Twice: 1, Inspect: 1, Concurrent: 1}
	for _, tc := range []struct {
		name  string
		mix   Mix
		draws []string // per step that read or drew: its name, the shares read and the streams drawn (main, side)
	}{
		{"owner waits twice", all, []string{
			"as-owner: owner main",
			"inspect-before: inspect main",
			"wait-in-line: blocking main cancel main",
			"wait-twice: twice main",
			"acquire: context main",
			"leave: leave",
			"renew: renew main",
			// The nested hold's TTL, its work, then its release: rushed
			// (its context's kind), a second call beside it (whether,
			// which); then the outer hold's work.
			"reenter: reenter main main main rush-release main concurrent side side main main",
			// The work, then the gap left for the write.
			"check-write: main main",
			"release: rush-release main concurrent side side main",
		}},
		{"retries, asks, works long", Mix{Blocking: 1, LongWork: 1, TTL: 1, Retry: 1}, []string{
			"as-owner: owner",
			"inspect-before: inspect",
			"wait-in-line: blocking main retry", // retries: no cancel to draw
			"acquire: context",
			"ask-ttl: ttl side",
			"leave: leave",
			"close-waiting: close-waiting",
			"renew: renew",
			"reenter: reenter long-work main main", // whether, then how long
			"check-write: main main",
			"release: rush-release concurrent",
		}},
		{"closes while waiting", Mix{CloseWaiting: 1}, []string{
			"as-owner: owner",
			"inspect-before: inspect",
			"wait-in-line: blocking",
			"acquire: context",
			"ask-ttl: ttl",
			"leave: leave",
			"close-waiting: close-waiting side",
		}},
		{"leave", Mix{Leave: 1}, []string{
			"as-owner: owner",
			"inspect-before: inspect",
			"wait-in-line: blocking",
			"acquire: context",
			"ask-ttl: ttl",
			"leave: leave main",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, read := drawsOfSection(t, tc.mix)
			if !slices.Equal(got, tc.draws) {
				t.Errorf("a section's draws:\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.draws, "\n\t"))
			}
			for name := range read {
				readAny[name] = true
			}
		})
	}
	for _, sh := range all.shares() {
		if !readAny[sh.name] {
			t.Errorf("Mix share %s: no step read it in any section here", sh.name)
		}
	}
}

// drawsOfSection runs one section (number 1) of a client of drawLock under
// mix, each step held to its declared shares, and returns per step that
// read or drew what it did, in order (the step's name, then the shares it
// read and the streams it drew from, "main" or "side").
func drawsOfSection(t *testing.T, mix Mix) (draws []string, read map[string]bool) {
	t.Helper()
	var mu sync.Mutex
	var cur []string // the running step's reads and draws
	tally := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		cur = append(cur, what)
	}
	cfg := Config{Mix: &mix, TTL: 40 * time.Millisecond, Hold: 2 * time.Millisecond, OpTimeout: time.Second, Think: time.Millisecond}
	w := &Workload{cfg: cfg}
	c := &Client{Name: "c0-0", Key: "k0", Gate: gate.New(), Clock: &gate.Clock{},
		rng: rand.New(tallied{rand.NewPCG(1, 0), "main", tally}), side: rand.New(tallied{rand.NewPCG(1, sideStream), "side", tally}),
		held: make(chan struct{}, 1), gone: make(chan struct{}),
		locker: &drawLock{}, fenced: fencing.NewMemory(), unfenced: fencing.NewUnfencedMemory()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := history.NewRecorder(nil, history.Options{})
	s := w.newSection(ctx, rec, c, 1)
	names := map[*float64]string{}
	for _, sh := range mix.shares() {
		names[sh.p] = sh.name
	}
	s.reads = func(p *float64) { tally(names[p]) }
	read = map[string]bool{}
	var steps []step
	for _, st := range sectionSteps() {
		run := st.run
		st.run = func(w *Workload, s *section) (bool, error) {
			mu.Lock()
			cur = nil
			mu.Unlock()
			done, err := run(w, s)
			mu.Lock()
			defer mu.Unlock()
			last := -1
			for _, what := range cur {
				if what == "main" || what == "side" {
					continue
				}
				read[what] = true
				i := slices.Index(st.draws, what)
				if i < 0 {
					t.Errorf("step %s reads share %s: not declared (%v)", st.name, what, st.draws)
				} else if i < last {
					t.Errorf("step %s reads share %s after %s: out of its declared order (%v)", st.name, what, st.draws[last], st.draws)
				}
				last = max(last, i)
			}
			if len(cur) > 0 {
				draws = append(draws, st.name+": "+strings.Join(cur, " "))
			}
			return done, err
		}
		steps = append(steps, st)
	}
	if err := w.runSteps(s, steps); err != nil && !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	cancel()
	c.watchers.Wait()
	return draws, read
}

// tallied is a source of randomness that tells tally of each draw, by its
// stream's name.
type tallied struct {
	src   rand.Source
	name  string
	tally func(string)
}

func (s tallied) Uint64() uint64 {
	s.tally(s.name)
	return s.src.Uint64()
}

// drawLock is an in-memory lock that grants every call at once, of the
// optional kinds a step reads a share for (an owner's, a waiter's, a
// retrier's, an inspector's; its leases nested, claiming, asking their
// server, with a context): a section on it reaches every step, and what
// it draws depends on the Mix alone. A Moded or Unwatched lock's sections
// draw more (a hold's mode, a wait without the watchdog), by no share.
type drawLock struct{ tokens atomic.Uint64 }

func (l *drawLock) Name() string { return "draws" }
func (l *drawLock) Close() error { return nil }
func (l *drawLock) grant(key string, ttl time.Duration) (locker.Lease, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &drawLease{key: key, ttl: ttl, token: l.tokens.Add(1), ctx: ctx, cancel: cancel}, nil
}
func (l *drawLock) TryAcquire(_ context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.grant(key, ttl)
}
func (l *drawLock) Acquire(_ context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.grant(key, ttl)
}
func (l *drawLock) AcquireRetry(_ context.Context, key string, ttl time.Duration) (locker.Lease, error) {
	return l.grant(key, ttl)
}
func (l *drawLock) AcquireAs(_ context.Context, key string, ttl time.Duration, _ string, _ bool, _ func()) (locker.Lease, error) {
	return l.grant(key, ttl)
}
func (l *drawLock) Inspect(context.Context, string) (locker.Inspection, error) {
	return locker.Inspection{}, nil
}
func (l *drawLock) HoldsOf(context.Context, string, string) (int64, error) { return 0, nil }

// drawLease is a drawLock's lease: valid for an hour whatever its TTL, so
// that every check before a write finds it valid.
type drawLease struct {
	key    string
	ttl    time.Duration
	token  uint64
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *drawLease) Key() string                                    { return l.key }
func (l *drawLease) TTL() time.Duration                             { return l.ttl }
func (l *drawLease) Fence() (uint64, bool)                          { return l.token, true }
func (l *drawLease) Release(context.Context) error                  { l.cancel(); return nil }
func (l *drawLease) Renew(context.Context, time.Duration) error     { return nil }
func (l *drawLease) Lost() <-chan struct{}                          { return nil }
func (l *drawLease) ValidUntil() time.Time                          { return time.Now().Add(time.Hour) }
func (l *drawLease) Context() context.Context                       { return l.ctx }
func (l *drawLease) TTLLeft(context.Context) (time.Duration, error) { return time.Hour, nil }
func (l *drawLease) Reenter(_ context.Context, ttl time.Duration) (locker.Lease, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &drawLease{key: l.key, ttl: ttl, token: l.token, ctx: ctx, cancel: cancel}, nil
}
