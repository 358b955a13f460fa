// Package fidelity checks an in-process Redis (miniredis, what simulation
// and deterministic unit tests run on) against a real redis-server: it
// records the commands a client sends (Recorder, a go-redis hook) and
// replays them on two servers at once, in order and with the gaps they
// were sent with (Replay), comparing after each command its replies and
// the whole key space (types, TTLs, strings, hash fields, sorted sets with
// scores), and at the end the pub/sub messages each delivered.
//
// Known differences, absorbed by the comparison and nothing else (Same):
// the two servers' clocks. A number of 10^14 or more is a time in
// microseconds (a fence, TIME) and may differ by 2s; one of 10^11 or more
// a time in milliseconds (a queue deadline) by 2000; one above 10 a
// duration in milliseconds (a PTTL) by 250 (the servers run a command a
// moment apart, and a loaded machine under the race detector stretches
// that moment past 100ms); numbers up to 10 (counts,
// flags) and every other character must be equal. A count above 10 would
// be compared as a duration: keep the scenarios' counts small. Error replies are
// compared by their code (NOSCRIPT, WRONGTYPE, ...), not their text.
package fidelity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Command is one command as a client sent it: its arguments and when,
// counted from the Recorder's start.
type Command struct {
	Args []any
	At   time.Duration
}

// String is the command with each argument cut to 40 bytes (a script's
// source stands for itself by its start).
func (c Command) String() string {
	parts := make([]string, len(c.Args))
	for i, a := range c.Args {
		s := fmt.Sprint(a)
		if len(s) > 40 {
			s = strings.Join(strings.Fields(s[:40]), " ") + "..."
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

// Recorder records the commands sent through the clients it hooks, in the
// order they were sent. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	cmds  []Command
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Hook is a go-redis hook that records every command before it is sent
// (pipelines command by command), but for a connection's handshake.
func (r *Recorder) Hook() redis.Hook { return recHook{r} }

// Commands returns the commands recorded so far.
func (r *Recorder) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}

// handshake are the commands go-redis sends to set up a connection: the
// servers answer them with who they are, which is no part of a lock's
// behaviour.
var handshake = []string{"hello", "client", "auth", "select", "readonly"}

func (r *Recorder) add(cmd redis.Cmder) {
	if slices.Contains(handshake, cmd.Name()) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, Command{Args: slices.Clone(cmd.Args()), At: time.Since(r.start)})
}

type recHook struct{ r *Recorder }

func (h recHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h recHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.r.add(cmd)
		return next(ctx, cmd)
	}
}

func (h recHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.r.add(c)
		}
		return next(ctx, cmds)
	}
}

// Target is one server of a replay.
type Target struct {
	// Name names it in differences ("redis-server", "miniredis").
	Name string
	// RDB reaches it; the replay sends its commands and reads its state
	// through it, and subscribes to every channel on it.
	RDB *redis.Client
	// Advance, when set, is called before each command with the time the
	// replay has run, for a server whose clock does not follow the wall
	// clock by itself (miniredis: FastForward and SetTime).
	Advance func(elapsed time.Duration)
}

// Miniredis starts a miniredis for tb (stopped at its end) as a replay's
// target: its clock starts at the wall clock's now and follows the replay
// (FastForward expires its keys, SetTime sets its TIME), since miniredis
// keeps time only when told.
func Miniredis(tb testing.TB) Target {
	tb.Helper()
	m := miniredis.RunT(tb)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	tb.Cleanup(func() { _ = rdb.Close() })
	start, last := time.Now(), time.Duration(0)
	m.SetTime(start)
	return Target{Name: "miniredis", RDB: rdb, Advance: func(elapsed time.Duration) {
		m.FastForward(elapsed - last)
		last = elapsed
		m.SetTime(start.Add(elapsed))
	}}
}

// Diff is one difference between the two targets.
type Diff struct {
	// Step is the 1-based index of the command after which it was seen
	// (0: the pub/sub messages, compared at the end).
	Step int
	// Command is that command; What says what differs; A and B are the
	// two targets' values.
	Command, What, A, B string
}

func (d Diff) String() string {
	return fmt.Sprintf("step %d (%s): %s differs:\n  a: %s\n  b: %s", d.Step, d.Command, d.What, d.A, d.B)
}

// ErrReplay wraps a failure of the replay itself (a server that cannot be
// reached, a state that cannot be read), as opposed to a difference.
var ErrReplay = errors.New("fidelity: replay failed")

// Replay sends cmds to a and b, each at its recorded offset from the
// replay's start, and returns every difference between them: in each
// reply, in the key space after each command, and in the pub/sub
// messages each delivered (every channel, in order). Both targets should
// start empty. It returns within ctx.
func Replay(ctx context.Context, cmds []Command, a, b Target) ([]Diff, error) {
	subs := make([]*subscription, 2)
	for i, t := range []Target{a, b} {
		s, err := subscribe(ctx, t.RDB)
		if err != nil {
			return nil, fmt.Errorf("%w: subscribe on %s: %w", ErrReplay, t.Name, err)
		}
		defer s.close()
		subs[i] = s
	}
	var diffs []Diff
	start := time.Now()
	for i, c := range cmds {
		if d := time.Until(start.Add(c.At)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return diffs, fmt.Errorf("%w: %w", ErrReplay, ctx.Err())
			}
		}
		var replies [2]string
		for j, t := range []Target{a, b} {
			if t.Advance != nil {
				t.Advance(time.Since(start))
			}
			replies[j] = render(t.RDB.Do(ctx, c.Args...).Result())
		}
		step := func(what, x, y string) {
			if !Same(x, y) {
				diffs = append(diffs, Diff{Step: i + 1, Command: c.String(), What: what, A: x, B: y})
			}
		}
		step("reply", replies[0], replies[1])
		var states [2]map[string]string
		for j, t := range []Target{a, b} {
			if t.Advance != nil {
				// TTLs as of this read, as the other's are as of its own.
				t.Advance(time.Since(start))
			}
			st, err := keyspace(ctx, t.RDB)
			if err != nil {
				return diffs, fmt.Errorf("%w: key space of %s after step %d: %w", ErrReplay, t.Name, i+1, err)
			}
			states[j] = st
		}
		for _, k := range keysOf(states[0], states[1]) {
			step("key "+strconv.Quote(k), states[0][k], states[1][k])
		}
	}
	// Messages published by the last commands are on their way.
	time.Sleep(50 * time.Millisecond)
	x, y := subs[0].messages(), subs[1].messages()
	for i := range max(len(x), len(y)) {
		var mx, my string
		if i < len(x) {
			mx = x[i]
		}
		if i < len(y) {
			my = y[i]
		}
		if !Same(mx, my) {
			diffs = append(diffs, Diff{What: fmt.Sprintf("pub/sub message %d", i+1), A: mx, B: my})
		}
	}
	return diffs, nil
}

func keysOf(a, b map[string]string) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

// keyspace reads every key's type, TTL and content, rendered.
func keyspace(ctx context.Context, rdb *redis.Client) (map[string]string, error) {
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		var content any
		switch typ {
		case "string":
			content, err = rdb.Get(ctx, k).Result()
		case "hash":
			content, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			var zs []redis.Z
			zs, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			var parts []string
			for _, z := range zs {
				parts = append(parts, fmt.Sprintf("%v=%s", z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64)))
			}
			content = strings.Join(parts, " ")
		case "none":
			continue // expired between KEYS and TYPE
		default:
			content = "(type not compared)"
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		ms := ttl.Milliseconds()
		if ttl < 0 {
			ms = int64(ttl) // -1 no expiry, -2 gone: go-redis passes them through as they are
		}
		out[k] = fmt.Sprintf("%s ttl=%d %s", typ, ms, renderValue(content))
	}
	return out, nil
}

// render writes a reply (or its error) as one string.
func render(v any, err error) string {
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "(nil)"
		}
		code, _, _ := strings.Cut(err.Error(), " ")
		return "(error " + code + ")"
	}
	return renderValue(v)
}

func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "(nil)"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderValue(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case map[string]string:
		ks := make([]string, 0, len(v))
		for k := range v {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts := make([]string, len(ks))
		for i, k := range ks {
			parts[i] = k + "=" + strconv.Quote(v[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	case string:
		return strconv.Quote(v)
	default:
		return fmt.Sprint(v)
	}
}

// Same reports whether two rendered values agree but for the servers'
// clocks (see the package doc): their runs of digits are compared as
// numbers, with the tolerance of their size, and everything else exactly.
func Same(a, b string) bool {
	ta, tb := tokens(a), tokens(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		x, xn := ta[i].num, ta[i].isNum
		y, yn := tb[i].num, tb[i].isNum
		if xn != yn || !xn && ta[i].text != tb[i].text {
			return false
		}
		if xn && !near(x, y) {
			return false
		}
	}
	return true
}

// near compares two numbers with the tolerance of the larger one's size.
func near(x, y uint64) bool {
	d, m := max(x, y)-min(x, y), max(x, y)
	switch {
	case m >= 1e14: // µs since the epoch
		return d <= 2_000_000
	case m >= 1e11: // ms since the epoch
		return d <= 2000
	case m > 10: // a duration in ms
		return d <= 250
	}
	return d == 0
}

type token struct {
	text  string
	num   uint64
	isNum bool
}

// tokens splits s into runs of ASCII digits (numbers, when they fit) and
// runs of anything else.
func tokens(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		j := i
		digit := s[i] >= '0' && s[i] <= '9'
		for j < len(s) && (s[j] >= '0' && s[j] <= '9') == digit {
			j++
		}
		t := token{text: s[i:j]}
		if digit {
			if n, err := strconv.ParseUint(t.text, 10, 64); err == nil {
				t.num, t.isNum = n, true
			}
		}
		out = append(out, t)
		i = j
	}
	return out
}

// subscription collects every message a server publishes, in order.
type subscription struct {
	ps   *redis.PubSub
	mu   sync.Mutex
	msgs []string
	done chan struct{}
}

func subscribe(ctx context.Context, rdb *redis.Client) (*subscription, error) {
	ps := rdb.PSubscribe(ctx, "*")
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		_ = ps.Close()
		return nil, err
	}
	s := &subscription{ps: ps, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for m := range ps.Channel() {
			s.mu.Lock()
			s.msgs = append(s.msgs, m.Channel+" "+strconv.Quote(m.Payload))
			s.mu.Unlock()
		}
	}()
	return s, nil
}

func (s *subscription) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

func (s *subscription) close() {
	_ = s.ps.Close()
	<-s.done
}
