package fidelity

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/redistest"
)

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`"x"`, `"x"`, true},
		{`"x"`, `"y"`, false},
		{"1", "2", false},                                     // a count
		{"9", "10", false},                                    // still a count
		{"1999", "1800", true},                                // a PTTL, 199ms apart
		{"1999", "1700", false},                               // 299ms apart
		{"1795706446235345", "1795706446233781", true},        // fences from the clock, in µs
		{"1795706446235345", "1795706449235345", false},       // 3s apart
		{"1764172800123", "1764172801123", true},              // a deadline in ms, 1s apart
		{`hash ttl=-1 {n="1"}`, `hash ttl=-1 {n="2"}`, false}, // holds
		{`[1 "a:5"]`, `[1 "a:5" 2]`, false},
		{"(error NOSCRIPT)", "(error NOSCRIPT)", true},
	} {
		if got := Same(c.a, c.b); got != c.same {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}

// TestReplayFindsDifferences: two real servers that differ in one key
// differ in the reply that reads it, in the key space, and in a message
// published with it.
func TestReplayFindsDifferences(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rdbs []*redis.Client
	for range 2 {
		p := redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		rdbs = append(rdbs, rdb)
	}
	if err := rdbs[1].Set(ctx, "seed", "b", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder()
	src := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { _ = src.Close() })
	src.AddHook(rec.Hook())
	script := `local v = redis.call('GET', 'seed') or 'none'; redis.call('PUBLISH', 'ch', v); return v`
	if err := src.Eval(ctx, script, nil).Err(); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	if err := src.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	cmds := rec.Commands()
	if len(cmds) != 2 {
		t.Fatalf("recorded %v, want the script and the SET (no handshake)", cmds)
	}
	diffs, err := Replay(ctx, cmds, Target{Name: "a", RDB: rdbs[0]}, Target{Name: "b", RDB: rdbs[1]})
	if err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, d := range diffs {
		what = append(what, d.What)
	}
	for _, want := range []string{"reply", `key "seed"`, "pub/sub message 1"} {
		found := false
		for _, w := range what {
			found = found || w == want
		}
		if !found {
			t.Errorf("no difference in %s; found %s", want, strings.Join(what, ", "))
		}
	}
	for _, d := range diffs {
		if d.What == `key "k"` {
			t.Errorf("the key both servers got alike differs: %s", d)
		}
	}
}
