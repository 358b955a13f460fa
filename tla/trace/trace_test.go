package trace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

func samples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample histories in ../testdata: %v", err)
	}
	return files
}

func read(t *testing.T, path string) []history.Op {
	t.Helper()
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return ops
}

func module(t *testing.T, tr *Trace) string {
	t.Helper()
	var b bytes.Buffer
	if err := tr.WriteModule(&b, ModuleName, "sample"); err != nil {
		t.Fatalf("WriteModule: %v", err)
	}
	return b.String()
}

func mustConvert(t *testing.T, ops []history.Op) *Trace {
	t.Helper()
	tr, err := Convert(ops, Options{})
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	return tr
}

// The output does not depend on the order of the history's lines.
func TestConvertDeterministic(t *testing.T) {
	for _, f := range samples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ops := read(t, f)
			want := module(t, mustConvert(t, ops))
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				shuffled := slices.Clone(ops)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if got := module(t, mustConvert(t, shuffled)); got != want {
					t.Fatalf("shuffled input gives another trace:\n%s\nwant:\n%s", got, want)
				}
			}
			traced := len(slices.DeleteFunc(slices.Clone(ops), untraced))
			if n := strings.Count(want, "\n"+EventPrefix); n != traced {
				t.Errorf("module has %d event lines, want %d (one per op but loss notices, closes, footprints and ttls)", n, traced)
			}
		})
	}
}

// checkTrace checks the invariants every trace has: small integers in
// range, every op once, and real-time order.
func checkTrace(t *testing.T, ops []history.Op, tr *Trace) {
	t.Helper()
	ops = slices.DeleteFunc(slices.Clone(ops), untraced)
	if len(tr.Events) != len(ops) {
		t.Fatalf("%d events for %d ops", len(tr.Events), len(ops))
	}
	if tr.Never <= 0 || tr.Never > math.MaxInt32 {
		t.Fatalf("Never = %d, want in 1..MaxInt32", tr.Never)
	}
	if !slices.IsSorted(tr.Tokens) {
		t.Errorf("tokens not ascending: %v", tr.Tokens)
	}
	byLine := map[int]history.Op{}
	for _, op := range ops {
		byLine[op.Line] = op
	}
	seen := map[int]bool{}
	for i, e := range tr.Events {
		op, ok := byLine[e.Line]
		if !ok || seen[e.Line] {
			t.Fatalf("event %d: line %d unknown or twice", i, e.Line)
		}
		seen[e.Line] = true
		for name, v := range map[string]int{"call": e.Call, "return": e.Return, "lo": e.Lo, "hi": e.Hi} {
			if v < 1 || v > tr.Never {
				t.Errorf("line %d: %s tick %d out of 1..%d", e.Line, name, v, tr.Never)
			}
		}
		if e.Call > e.Return {
			t.Errorf("line %d: call %d after return %d", e.Line, e.Call, e.Return)
		}
		if (e.Return == tr.Never) != op.OpenEnded() {
			t.Errorf("line %d: return %d, open-ended %v", e.Line, e.Return, op.OpenEnded())
		}
		if op.Kind == history.Fault {
			if e.Client != 0 || e.Key != 0 {
				t.Errorf("line %d: fault with client %d key %d", e.Line, e.Client, e.Key)
			}
		} else {
			if e.Client < 1 || e.Client > len(tr.Clients) || tr.Clients[e.Client-1] != op.Client {
				t.Errorf("line %d: client %d does not map back to %q", e.Line, e.Client, op.Client)
			}
			if e.Key < 1 || e.Key > len(tr.Keys) || tr.Keys[e.Key-1] != op.Key {
				t.Errorf("line %d: key %d does not map back to %q", e.Line, e.Key, op.Key)
			}
		}
		if op.HasToken != (e.Token > 0) || (op.HasToken && tr.Tokens[e.Token-1] != op.Token) {
			t.Errorf("line %d: token %d does not map back to %d", e.Line, e.Token, op.Token)
		}
		if op.HasValue && (e.Value < 0 || e.Value > len(tr.Values) || value(tr, e.Value) != op.Value) {
			t.Errorf("line %d: value %d does not map back to %q", e.Line, e.Value, op.Value)
		}
		// Real time (within a key; keys are independent in the spec, and
		// faults come first): nothing placed later returned before this was called.
		if i > 0 && op.Kind == history.Fault && tr.Events[i-1].Kind != "fault" {
			t.Errorf("fault line %d after a non-fault", e.Line)
		}
		// Upto: the events up to it were called before this one returned,
		// and the one after it was not (or is another key's, or MaxAhead).
		if e.Upto < i+1 || e.Upto > len(tr.Events) || e.Upto-(i+1) > MaxAhead {
			t.Errorf("line %d at position %d: upto %d", e.Line, i+1, e.Upto)
		} else {
			for _, o := range tr.Events[i+1 : e.Upto] {
				if o.Key != e.Key || o.Call > e.Return {
					t.Errorf("line %d: upto %d passes line %d (key %d, call %d; return %d)", e.Line, e.Upto, o.Line, o.Key, o.Call, e.Return)
				}
			}
			if e.Upto < len(tr.Events) && e.Upto-(i+1) < MaxAhead {
				if n := tr.Events[e.Upto]; n.Key == e.Key && n.Call <= e.Return {
					t.Errorf("line %d: upto %d stops before line %d, called (%d) before it returned (%d)", e.Line, e.Upto, n.Line, n.Call, e.Return)
				}
			}
		}
		for _, later := range tr.Events[i+1:] {
			if later.Key == e.Key && later.Return < e.Call {
				t.Errorf("line %d placed after line %d, which returned (tick %d) before it was called (tick %d)",
					e.Line, later.Line, later.Return, e.Call)
			}
		}
	}
	// Ticks preserve the order of times.
	evs := map[int]Event{}
	for _, e := range tr.Events {
		evs[e.Line] = e
	}
	for _, a := range ops {
		for _, b := range ops {
			ea, eb := evs[a.Line], evs[b.Line]
			if (a.Call < b.Call) != (ea.Call < eb.Call) {
				t.Errorf("lines %d, %d: call order not preserved", a.Line, b.Line)
			}
			if a.HasToken && b.HasToken && (a.Token < b.Token) != (ea.Token < eb.Token) {
				t.Errorf("lines %d, %d: token order not preserved", a.Line, b.Line)
			}
		}
	}
}

func value(tr *Trace, v int) string {
	if v == 0 {
		return ""
	}
	return tr.Values[v-1]
}

func event(tr *Trace, line int) Event {
	for _, e := range tr.Events {
		if e.Line == line {
			return e
		}
	}
	return Event{}
}

func TestConvertSamples(t *testing.T) {
	for _, f := range samples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ops := read(t, f)
			checkTrace(t, ops, mustConvert(t, ops))
		})
	}
}

func TestOrder(t *testing.T) {
	// Faults first, then each key by call; each event's Upto reaches the
	// last event called before it returned.
	ops := []history.Op{
		{Line: 1, Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 1, Completed: true, Result: history.OK, TTLMillis: 1000, Token: 1, HasToken: true},
		{Line: 2, Client: "a", Kind: history.Release, Key: "k", Call: 7, Return: 10, Completed: true, Result: history.OK, Token: 1, HasToken: true},
		{Line: 3, Client: "b", Kind: history.Acquire, Key: "k", Call: 8, Return: 9, Completed: true, Result: history.OK, TTLMillis: 1000, Token: 2, HasToken: true},
		{Line: 4, Client: "a", Kind: history.Write, Key: "k", Call: 11, Return: 20, Completed: true, Result: history.Rejected, Token: 1, HasToken: true, Value: "x", HasValue: true},
		{Line: 5, Client: "b", Kind: history.Write, Key: "k", Call: 12, Return: 13, Completed: true, Result: history.OK, Token: 2, HasToken: true, Value: "y", HasValue: true},
		{Line: 6, Client: "d", Kind: history.Acquire, Key: "j", Call: 9, Return: 30, Completed: true, Result: history.Fail, TTLMillis: 1000},
		{Line: 7, Kind: history.Fault, Name: "pause-client c0-1", Call: 5, Return: 15, Completed: true},
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	var lines, upto []int
	for _, e := range tr.Events {
		lines = append(lines, e.Line)
		upto = append(upto, e.Upto)
	}
	// Key "j" is key 1, "k" key 2.
	if want := []int{7, 6, 1, 2, 3, 4, 5}; !slices.Equal(lines, want) {
		t.Errorf("order %v, want %v", lines, want)
	}
	if want := []int{1, 2, 3, 5, 5, 7, 7}; !slices.Equal(upto, want) {
		t.Errorf("upto %v, want %v", upto, want)
	}
}

// An op that never returned may be passed by at most MaxAhead later ops.
func TestUptoBounded(t *testing.T) {
	ops := []history.Op{{Line: 1, Client: "a", Kind: history.Write, Key: "k", Call: 0, Result: history.Unknown, Token: 1, HasToken: true, Value: "v", HasValue: true}}
	for i := range 2 * MaxAhead {
		ops = append(ops, history.Op{Line: i + 2, Client: "b", Kind: history.Acquire, Key: "k", Call: int64(10 * (i + 1)), Return: int64(10*(i+1) + 5), Completed: true, Result: history.Fail, TTLMillis: 1000})
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	if got := tr.Events[0].Upto; got != 1+MaxAhead {
		t.Errorf("never-returned op: upto %d, want %d", got, 1+MaxAhead)
	}
}

// Win marks the ops that overlap a failover window, which lasts Settle past
// the fault's return; other faults open no window.
func TestFailoverWindows(t *testing.T) {
	ms := int64(time.Millisecond)
	op := func(line int, call, ret int64) history.Op {
		return history.Op{Line: line, Client: "a", Kind: history.Acquire, Key: "k", Call: call * ms, Return: ret * ms, Completed: true, Result: history.Fail, TTLMillis: 1000}
	}
	ops := []history.Op{
		op(1, 0, 5),     // before the window
		op(2, 8, 12),    // overlaps its start
		op(3, 30, 40),   // within Settle after its return
		op(4, 126, 130), // after Settle
		op(5, 200, 210), // in the pause-client window only
		{Line: 6, Kind: history.Fault, Name: "failover partition", Call: 10 * ms, Return: 20 * ms, Completed: true},
		{Line: 7, Kind: history.Fault, Name: "pause-client c0-1", Call: 190 * ms, Return: 220 * ms, Completed: true},
	}
	tr, err := Convert(ops, Options{Settle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[int]bool{1: false, 2: true, 3: true, 4: false, 5: false} {
		if got := event(tr, line).Win; got != want {
			t.Errorf("line %d: win %v, want %v", line, got, want)
		}
	}
	// A failover that never ended: every later op may be affected.
	ops[5].Completed, ops[5].Return = false, 0
	tr = mustConvert(t, ops)
	if !event(tr, 4).Win || !event(tr, 5).Win || event(tr, 1).Win {
		t.Errorf("unended failover: wins %v %v %v, want false true true", event(tr, 1).Win, event(tr, 4).Win, event(tr, 5).Win)
	}
	if _, err := Convert(ops, Options{Settle: -time.Second}); err == nil {
		t.Error("negative Settle accepted")
	}
	if tr.Skewed {
		t.Error("a plain failover marked the trace skewed")
	}
	// A failover to a skewed replica opens the same windows and marks the
	// trace: its promoted master's fences need not exceed the old one's.
	ops[5].Name, ops[5].Completed, ops[5].Return = SkewWindowFault+" partition", true, 20*ms
	tr, err = Convert(ops, Options{Settle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Skewed || !event(tr, 2).Win || !event(tr, 3).Win || event(tr, 4).Win {
		t.Errorf("failover-skew window: skewed %v, wins %v %v %v; want true true true false", tr.Skewed, event(tr, 2).Win, event(tr, 3).Win, event(tr, 4).Win)
	}
	// Redis forgetting the lock (key-loss, a restart without persistence,
	// a force-unlock) opens the same window, unskewed: the master after the
	// loss starts without the lease, with fences above the lost ones.
	for _, kind := range []string{contract.FaultKeyLoss, contract.FaultRestart, contract.FaultForceUnlock} {
		ops[5].Name = kind + " c0-1 k"
		ktr, err := Convert(ops, Options{Settle: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if ktr.Skewed || !event(ktr, 2).Win || !event(ktr, 3).Win || event(ktr, 4).Win || event(ktr, 1).Win {
			t.Errorf("%s window: skewed %v, wins %v %v %v %v; want false, false true true false", kind, ktr.Skewed, event(ktr, 1).Win, event(ktr, 2).Win, event(ktr, 3).Win, event(ktr, 4).Win)
		}
	}
	var b strings.Builder
	if err := tr.WriteModule(&b, ModuleName, "test"); err != nil || !strings.Contains(b.String(), "\nSkewed == TRUE\n") {
		t.Errorf("module without Skewed == TRUE (%v):\n%s", err, b.String())
	}
}

func TestLeaseBounds(t *testing.T) {
	// A 200ms lease taken in [0, 2ms] with 1% drift: surely valid until
	// 198ms, surely expired after 204ms.
	mk := func(line int, call int64) history.Op {
		return history.Op{Line: line, Client: "x", Kind: history.Read, Key: "k", Call: call, Return: call, Completed: true,
			Result: history.Unknown, Token: 1, HasToken: true}
	}
	ops := []history.Op{
		{Line: 1, Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 2e6, Completed: true, Result: history.OK, TTLMillis: 200, Token: 1, HasToken: true},
		mk(2, 197_999_999), mk(3, 198e6), mk(4, 204e6), mk(5, 204_000_001),
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	acq := event(tr, 1)
	if acq.Lo != event(tr, 3).Call || acq.Hi != event(tr, 4).Call {
		t.Errorf("lo %d hi %d, want %d and %d (the ticks of 198ms and 204ms)", acq.Lo, acq.Hi, event(tr, 3).Call, event(tr, 4).Call)
	}
	if !(event(tr, 2).Call < acq.Lo && acq.Hi < event(tr, 5).Call) {
		t.Errorf("lease bounds not between their neighbours: %+v", tr.Events)
	}
	// Another drift moves the bounds.
	tr, err := Convert(ops, Options{DriftPPM: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	if acq := event(tr, 1); acq.Lo >= event(tr, 2).Call || acq.Hi <= event(tr, 5).Call {
		t.Errorf("2%% drift: lo %d hi %d not outside 196..208ms", acq.Lo, acq.Hi)
	}
	// No TTL: the lease never expires.
	ops[0].TTLMillis = 0
	tr = mustConvert(t, ops)
	if acq := event(tr, 1); acq.Lo != tr.Never || acq.Hi != tr.Never {
		t.Errorf("no ttl: lo %d hi %d, want Never %d", acq.Lo, acq.Hi, tr.Never)
	}
}

// An unknown acquire or renew may have taken effect: it has lease bounds
// too (hi Never when it never returned); a failed one has none.
func TestUnknownLeaseBounds(t *testing.T) {
	ops := []history.Op{
		{Line: 1, Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 2e6, Completed: true, Result: history.Unknown, TTLMillis: 200},
		{Line: 2, Client: "a", Kind: history.Renew, Key: "k", Call: 3e6, Result: history.Unknown, TTLMillis: 200, Token: 1, HasToken: true},
		{Line: 3, Client: "b", Kind: history.Acquire, Key: "k", Call: 4e6, Return: 5e6, Completed: true, Result: history.Fail, TTLMillis: 200},
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	if e := event(tr, 1); e.Lo == tr.Never || e.Hi == tr.Never {
		t.Errorf("unknown acquire: lo %d hi %d; want both finite", e.Lo, e.Hi)
	}
	if e := event(tr, 2); e.Lo == tr.Never || e.Hi != tr.Never {
		t.Errorf("never-returned renew: lo %d hi %d; want lo finite, hi Never", e.Lo, e.Hi)
	}
	if e := event(tr, 3); e.Lo != tr.Never || e.Hi != tr.Never {
		t.Errorf("failed acquire: lo %d hi %d; want Never", e.Lo, e.Hi)
	}
}

// Foreign marks the resource ops whose token another client owns: the
// client of the token's first ok acquire by call, else of its first ok
// resource op by call; an acquire later in the file but earlier by call
// decides.
func TestForeign(t *testing.T) {
	w := func(line int, c string, call int64, tok uint64, res history.Result) history.Op {
		return history.Op{Line: line, Client: c, Kind: history.Write, Key: "k", Call: call, Return: call + 1, Completed: true,
			Result: res, Token: tok, HasToken: true, Value: c, HasValue: true}
	}
	ops := []history.Op{
		w(1, "a", 10, 1, history.OK),      // b's token 1 (b's acquire is earlier by call)
		w(2, "b", 20, 1, history.OK),      // its own
		w(3, "c", 30, 2, history.Unknown), // token 2 has no acquire; c's unknown write does not own it
		w(4, "d", 40, 2, history.OK),      // the first ok op with 2: d owns it
		w(5, "c", 50, 2, history.OK),      // d's
		{Line: 6, Client: "b", Kind: history.Acquire, Key: "k", Call: 5, Return: 6, Completed: true, Result: history.OK, TTLMillis: 100, Token: 1, HasToken: true},
		w(7, "a", 60, 1, history.Rejected), // b's: marked, though a rejected op is not judged
	}
	tr := mustConvert(t, ops)
	for line, want := range map[int]bool{1: true, 2: false, 3: true, 4: false, 5: true, 6: false, 7: true} {
		if got := event(tr, line).Foreign; got != want {
			t.Errorf("line %d: foreign %v, want %v", line, got, want)
		}
	}
}

// Bounded says that MaxAhead cut a lookahead, and only then.
func TestBounded(t *testing.T) {
	long := func(n int) []history.Op {
		ops := []history.Op{{Line: 1, Client: "a", Kind: history.Write, Key: "k", Call: 0, Result: history.Unknown, Token: 1, HasToken: true, Value: "v", HasValue: true}}
		for i := range n {
			ops = append(ops, history.Op{Line: i + 2, Client: "b", Kind: history.Acquire, Key: "k", Call: int64(10 * (i + 1)), Return: int64(10*(i+1) + 5), Completed: true, Result: history.Fail, TTLMillis: 1000})
		}
		return ops
	}
	if tr := mustConvert(t, long(MaxAhead)); tr.Bounded {
		t.Errorf("%d ops after a never-returned one: bounded; want not", MaxAhead)
	}
	if tr := mustConvert(t, long(MaxAhead+1)); !tr.Bounded {
		t.Errorf("%d ops after a never-returned one: not bounded; want bounded", MaxAhead+1)
	}
}

// Huge times, tokens and TTLs still give small integers.
func TestIntegerRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ops []history.Op
	clients := []string{"zed", "alpha", "mid", "ü"}
	for i := range 300 {
		call := rng.Int64N(history.MaxTime - 1e9) // the largest times a history may hold
		op := history.Op{Line: i + 1, Client: clients[i%len(clients)], Key: []string{"k1", "k2"}[i%2],
			Call: call, Return: call + rng.Int64N(1e9), Completed: i%7 != 0, Token: rng.Uint64(), HasToken: true}
		switch i % 3 {
		case 0:
			op.Kind, op.TTLMillis = history.Acquire, 1+rng.Int64N(history.MaxTTLMillis)
		case 1:
			op.Kind, op.Value, op.HasValue = history.Write, string(rune('a'+i%26))+"\"\\", true
		default:
			op.Kind = history.Release
		}
		op.Result = history.OK
		if !op.Completed {
			op.Return, op.Result = 0, history.Unknown
		}
		ops = append(ops, op)
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	if len(tr.Clients) != len(clients) || len(tr.Keys) != 2 {
		t.Errorf("clients %v keys %v", tr.Clients, tr.Keys)
	}
	if !slices.IsSorted(tr.Clients) {
		t.Errorf("clients not numbered in name order: %v", tr.Clients)
	}
	// Every number TLC reads fits its 32-bit integers (the comments name
	// the original tokens).
	for _, line := range strings.Split(module(t, tr), "\n") {
		if strings.HasPrefix(line, "\\*") {
			continue
		}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r < '0' || r > '9' }) {
			if len(f) > 10 || (len(f) == 10 && f > "2147483647") {
				t.Fatalf("number %s in %q does not fit 32 bits", f, line)
			}
		}
	}
}

func TestWriteNDJSON(t *testing.T) {
	ops := read(t, filepath.Join("..", "testdata", "ok-paused-holder-write-rejected.jsonl"))
	tr := mustConvert(t, ops)
	var b bytes.Buffer
	if err := tr.WriteNDJSON(&b); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&b)
	var got []Event
	for sc.Scan() {
		var e jsonEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, Event(e))
	}
	if !slices.Equal(got, tr.Events) {
		t.Errorf("ndjson events\n%+v\nwant\n%+v", got, tr.Events)
	}
	// The module lists the same events in the same order.
	m := module(t, tr)
	var lines []string
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, EventPrefix) {
			lines = append(lines, l)
		}
	}
	for i, e := range tr.Events {
		if !strings.HasPrefix(lines[i], EventPrefix+itoa(e.Line)+",") {
			t.Errorf("module event %d is %q, want history line %d", i+1, lines[i], e.Line)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestBadInput(t *testing.T) {
	ok := history.Op{Line: 4, Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 1, Completed: true,
		Result: history.OK, TTLMillis: 10, Token: 1, HasToken: true}
	cases := []struct {
		name string
		op   func(*history.Op)
		is   error
		msg  string
	}{
		{"ok acquire without token", func(o *history.Op) { o.HasToken, o.Token = false, 0 }, ErrNotFenced, "line 4"},
		{"rejected write without token", func(o *history.Op) {
			o.Kind, o.Result, o.TTLMillis, o.HasToken, o.Value, o.HasValue = history.Write, history.Rejected, 0, false, "v", true
		}, ErrNotFenced, "line 4"},
		{"unknown write without token", func(o *history.Op) {
			o.Kind, o.Result, o.TTLMillis, o.HasToken, o.Value, o.HasValue = history.Write, history.Unknown, 0, false, "v", true
		}, ErrNotFenced, "line 4"},
		{"unknown op", func(o *history.Op) { o.Kind = "steal" }, history.ErrBadInput, "line 4"},
		{"return before call", func(o *history.Op) { o.Call = 5 }, history.ErrBadInput, "line 4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op := ok
			c.op(&op)
			_, err := Convert([]history.Op{op}, Options{})
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v naming %q", err, c.is, c.msg)
			}
		})
	}
	for _, d := range []int64{-1, 1_000_000} {
		if _, err := Convert([]history.Op{ok}, Options{DriftPPM: d}); err == nil || !strings.Contains(err.Error(), "drift") {
			t.Errorf("drift %d: err = %v, want a drift error", d, err)
		}
	}
	tr := mustConvert(t, []history.Op{ok})
	for _, name := range []string{"", "9", "Trace Data", "Tr-ace", "Träce"} {
		if err := tr.WriteModule(&bytes.Buffer{}, name, "x"); err == nil {
			t.Errorf("module name %q accepted", name)
		}
	}
}

// Unfenced ops that cannot matter (a failed acquire, an unknown release)
// are fine without a token.
func TestTokenlessFailures(t *testing.T) {
	ops := []history.Op{
		{Line: 1, Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 1, Completed: true, Result: history.Fail, TTLMillis: 10},
		{Line: 2, Client: "a", Kind: history.Release, Key: "k", Call: 2, Result: history.Unknown},
	}
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
}

// TestLossNoticesLeftOut: a history's loss notices (lost ops) and the
// claims fields are what the lock told its holder, and deadlines and close
// ops what the calls property judges: the trace spec does not describe
// them, and the trace is the one of the same history without them. (Lease
// numbers it reads: see TestLeaseNumbers.)
func TestLossNoticesLeftOut(t *testing.T) {
	for _, f := range samples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ops := read(t, f)
			want := module(t, mustConvert(t, ops))
			var with []history.Op
			for _, o := range ops {
				with = append(with, o)
				if o.Kind != history.Fault {
					// Deadlines and closes are the calls property's.
					with[len(with)-1].Deadline, with[len(with)-1].HasDeadline = o.Call+1, true
				}
				if o.Kind == history.Release && o.Result == history.OK && o.Completed {
					with = append(with, history.Op{Client: o.Client, Kind: history.Close, Key: o.Key, Call: o.Return, Return: o.Return,
						Completed: true, Result: history.OK, Line: o.Line})
				}
				if o.Kind == history.Acquire && o.Result == history.OK && o.Completed {
					with[len(with)-1].ValidUntil, with[len(with)-1].HasValid = o.Return+1, true
					with = append(with, history.Op{Client: o.Client, Kind: history.Lost, Key: o.Key, Call: o.Return, Return: o.Return,
						Completed: true, Result: history.OK, Hold: o.Hold, Line: o.Line})
				}
			}
			if got := module(t, mustConvert(t, with)); got != want {
				t.Fatalf("with loss notices, claims, deadlines and closes the trace differs:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestInspectEvents: an inspect or holds op is an event that carries what
// the lock said: held, the holder named (a client of its own when no op
// of the history is its), the fence told as a token and the count (-1:
// not told); a holds op names no holder.
func TestInspectEvents(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: ms, Completed: true, Result: history.OK, TTLMillis: 100, Token: 7, HasToken: true, Line: 1},
		{Client: "b", Kind: history.Inspect, Key: "k", Call: 2 * ms, Return: 3 * ms, Completed: true, Result: history.OK,
			Held: true, Holder: "a", Token: 7, HasToken: true, HoldCount: 2, HasHolds: true, Line: 2},
		{Client: "b", Kind: history.Inspect, Key: "k", Call: 4 * ms, Return: 5 * ms, Completed: true, Result: history.OK,
			Held: true, Holder: "zed", Line: 3},
		{Client: "b", Kind: history.Inspect, Key: "k", Call: 6 * ms, Return: 7 * ms, Completed: true, Result: history.OK, Line: 4},
		{Client: "a", Kind: history.Holds, Key: "k", Call: 8 * ms, Return: 9 * ms, Completed: true, Result: history.OK,
			HoldCount: 0, HasHolds: true, Line: 5},
	}
	tr := mustConvert(t, ops)
	if !slices.Equal(tr.Clients, []string{"a", "b", "zed"}) {
		t.Fatalf("clients %v; want a, b and the stranger zed", tr.Clients)
	}
	type said struct {
		kind          string
		held          bool
		holder, count int
		tok           int
	}
	var got []said
	for _, e := range tr.Events {
		if e.Kind == string(history.Inspect) || e.Kind == string(history.Holds) {
			got = append(got, said{e.Kind, e.Held, e.Holder, e.Count, e.Token})
		}
	}
	want := []said{{"inspect", true, 1, 2, 1}, {"inspect", true, 3, -1, 0}, {"inspect", false, 0, -1, 0}, {"holds", false, 0, 0, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("inspect events %+v; want %+v", got, want)
	}
	if m := module(t, tr); !strings.Contains(m, "held |-> TRUE, holder |-> 1, count |-> 2") {
		t.Fatalf("the module does not carry the answer:\n%s", m)
	}
}

// TestLeaseNumbers: the lease numbers of acquires, releases and renews go
// to the trace, mapped to 1..n in their order; a release or renew of a
// number no acquire of its client and key carries, and every other op,
// gets 0 (read by count, as without numbers).
func TestLeaseNumbers(t *testing.T) {
	op := func(line int, c string, kind history.Kind, lease uint64) history.Op {
		return history.Op{Line: line, Client: c, Kind: kind, Key: "k", Call: int64(line), Return: int64(line) + 1, Completed: true,
			Result: history.OK, Token: 7, HasToken: true, TTLMillis: 100, Hold: lease}
	}
	ops := []history.Op{
		op(1, "a", history.Acquire, 1000),
		op(2, "a", history.Acquire, 5),
		op(3, "a", history.Renew, 1000),
		op(4, "a", history.Release, 5),
		op(5, "a", history.Release, 9),    // no acquire of a has 9
		op(6, "b", history.Release, 1000), // nor of b 1000
		op(7, "a", history.Write, 1000),
		op(8, "a", history.Release, 0),
	}
	for i := range ops {
		if ops[i].Kind != history.Acquire && ops[i].Kind != history.Renew {
			ops[i].TTLMillis = 0
		}
	}
	ops[6].Value, ops[6].HasValue = "x", true
	tr := mustConvert(t, ops)
	checkTrace(t, ops, tr)
	got := map[int]int{}
	for _, e := range tr.Events {
		got[e.Line] = e.Lease
	}
	want := map[int]int{1: 2, 2: 1, 3: 2, 4: 1, 5: 0, 6: 0, 7: 0, 8: 0}
	if !maps.Equal(got, want) {
		t.Errorf("lease numbers by line %v, want %v", got, want)
	}
	if m := module(t, tr); !strings.Contains(m, "lease |-> 2, upto") {
		t.Errorf("module has no lease field:\n%s", m)
	}
}

// TestConvertContextStops: a conversion whose context ends stops with an
// error wrapping the context's cause (lockproof trace's budget), and the
// module's names are bounded by WriteModuleNames.
func TestConvertContextStops(t *testing.T) {
	ops := read(t, filepath.Join("..", "testdata", "ok-paused-holder-write-rejected.jsonl"))
	cause := errors.New("budget spent")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if tr, err := ConvertContext(ctx, ops, Options{}); !errors.Is(err, cause) || tr != nil {
		t.Fatalf("ConvertContext after its end: %v, %v; want no trace and the cause", tr, err)
	}
	tr, err := ConvertContext(context.Background(), ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tr.WriteModuleNames(&b, ModuleName, "sample", 1); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n\\* client "); len(tr.Clients) < 2 || n != 1 ||
		!strings.Contains(b.String(), fmt.Sprintf("\n\\* ... and %d more clients\n", len(tr.Clients)-1)) {
		t.Errorf("%d clients, %d named; want 1 named and the rest counted:\n%s", len(tr.Clients), n, b.String())
	}
}
