package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/history"
)

// manyKeys writes a gzip-compressed history of n keys, each with one
// fenced acquire and its release, one after the other (issue 62: a 14 MB
// history of a million such keys took check and trace past every budget).
func manyKeys(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.jsonl.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := history.NewWriter(zw)
	for i := range n {
		key, at, tok := fmt.Sprintf("k%d", i), int64(1000+100*i), uint64(i+1)
		for _, op := range []history.Op{
			{Client: "c1", Kind: history.Acquire, Key: key, Call: at, Return: at + 10, Completed: true, Result: history.OK, TTLMillis: 100, Token: tok, HasToken: true},
			{Client: "c1", Kind: history.Release, Key: key, Call: at + 20, Return: at + 30, Completed: true, Result: history.OK, Token: tok, HasToken: true},
		} {
			if err := w.WriteOp(op); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// liveHeap is the heap the budget watches (checker.Budget's sample).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// peakHeap runs f while sampling the heap every millisecond and returns
// the highest sample. A sample can miss a short peak, never invent one:
// the test it serves holds the heap under a bound.
func peakHeap(f func()) uint64 {
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, liveHeap())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	return max(peak, liveHeap())
}

// boundsKeys is the key count of the budget tests: 400,000 ops, about
// 130 MiB of history in memory, well past the budgets they set, and
// written in well under a second.
const boundsKeys = 200_000

// TestManyKeysHoldTheHeapBudget: check and trace stop a history of many
// keys at --max-heap, from the first line read: exit 3, saying so, with
// the heap never far past the budget, and no half-written --out left.
// Before, check watched the heap only once the whole history was read and
// prepared (2.6 GB on a million keys under --max-heap 256MiB), and trace
// had no budget at all.
func TestManyKeysHoldTheHeapBudget(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	path := manyKeys(t, boundsKeys)
	// room is the budget above what the test process holds; slack what
	// the heap may pass it by before the watcher (every 5 ms) stops the
	// reading: a few MiB of a fast reader, with a wide margin for a busy
	// machine. Reading the whole history takes about 130 MiB more.
	const room, slack = 48 << 20, 48 << 20
	for _, cmd := range []string{"check", "trace"} {
		t.Run(cmd, func(t *testing.T) {
			tla := filepath.Join(t.TempDir(), "T.tla")
			runtime.GC()
			budget := liveHeap() + room
			args := []string{cmd, "--max-heap", fmt.Sprint(budget), "--timeout", "2m", path}
			if cmd == "trace" {
				args = append(args, "--out", tla)
			}
			var code int
			var out, errs bytes.Buffer
			peak := peakHeap(func() { code = dispatch(context.Background(), args, &out, &errs) })
			if code != exitUnknown || !strings.Contains(out.String()+errs.String(), "heap budget exhausted") {
				t.Fatalf("exit %d, stdout %.300q, stderr %.300q; want exit 3 naming the heap budget", code, out.String(), errs.String())
			}
			if peak > budget+slack {
				t.Errorf("heap peaked at %d MiB, budget %d MiB: %d MiB past it (allowed %d)", peak>>20, budget>>20, (peak-budget)>>20, slack>>20)
			}
			if cmd == "check" {
				oneLine(t, out.String())
			}
			if _, err := os.Stat(tla); !os.IsNotExist(err) {
				t.Errorf("--out %s is left behind (%v)", tla, err)
			}
		})
	}
}

// TestManyKeysHoldTheTimeBudget: check and trace end a history of many
// keys soon after --timeout, and after their context ends (main cancels
// it on SIGTERM): exit 3. Before, check read the whole history whatever
// its budget and then ran every key's direct rules past it (a million
// keys: 50 s under --timeout 20s, 2 minutes after SIGTERM); trace had no
// budget.
func TestManyKeysHoldTheTimeBudget(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	path := manyKeys(t, boundsKeys)
	// The budget ends the reading within milliseconds and the check within
	// its grace (250 ms); limit leaves seconds for a loaded machine. The
	// code before took 4 s on 2 busy cores.
	const budget, limit = 500 * time.Millisecond, 2500 * time.Millisecond
	for _, cmd := range []string{"check", "trace"} {
		for _, how := range []string{"timeout", "cancel"} {
			t.Run(cmd+"/"+how, func(t *testing.T) {
				args := []string{cmd, path}
				ctx := context.Background()
				if how == "timeout" {
					args = append(args, "--timeout", budget.String())
				} else {
					var cancel func()
					ctx, cancel = context.WithTimeout(ctx, budget)
					defer cancel()
				}
				if cmd == "trace" {
					args = append(args, "--out", filepath.Join(t.TempDir(), "T.tla"))
				}
				var out, errs bytes.Buffer
				start := time.Now()
				code := dispatch(ctx, args, &out, &errs)
				took := time.Since(start)
				if code != exitUnknown {
					t.Fatalf("exit %d, stdout %.300q, stderr %.300q; want exit 3", code, out.String(), errs.String())
				}
				if took > limit {
					t.Errorf("took %v under a budget of %v (allowed %v)", took.Round(time.Millisecond), budget, limit)
				}
			})
		}
	}
}

// TestCheckShowsTheFirstKeys: a check that leaves hundreds of keys
// undecided lists the first --keys-shown of them per property (10 unless
// told; 0: every one the result keeps, checker.MaxUndecided) and one line
// counting the rest; check.json counts them all. Before, it printed a
// line per key and property (116 MB on a million keys).
func TestCheckShowsTheFirstKeys(t *testing.T) {
	const keys, n = 300, 40
	var ops []history.Op
	for k := range keys {
		key := fmt.Sprintf("hot%03d", k)
		// TestCheckTimeoutIsUnknown's hard key: writes of unknown outcome
		// read in a scrambled order, which no search decides in time.
		for i := range n {
			ops = append(ops, history.Op{Client: fmt.Sprintf("w%d", i), Kind: history.Write, Key: key, Call: int64(i),
				Result: history.Unknown, Value: fmt.Sprint(i), HasValue: true})
		}
		for i := range n {
			ops = append(ops, history.Op{Client: "r", Kind: history.Read, Key: key, Call: int64(1000 + 2*i), Return: int64(1001 + 2*i),
				Completed: true, Result: history.OK, Value: fmt.Sprint((i * 7) % n), HasValue: true})
		}
	}
	path := filepath.Join(t.TempDir(), "hot.jsonl")
	if err := history.WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		listed int
	}{
		{nil, defaultKeysShown},
		{[]string{"--keys-shown", "3"}, 3},
		{[]string{"--keys-shown", "0"}, checker.MaxUndecided},
	} {
		jsonPath := filepath.Join(t.TempDir(), "check.json")
		args := append([]string{"--timeout", "300ms", "--json", jsonPath}, c.args...)
		code, out, errs := runCheckArgs(t, append(args, path)...)
		oneLine(t, out)
		if code != exitUnknown {
			t.Fatalf("%v: exit %d, %q; want 3", c.args, code, out)
		}
		var undecided []string
		for _, l := range strings.Split(errs, "\n") {
			if strings.Contains(l, ": resource safety: ") {
				undecided = append(undecided, l)
			}
		}
		more := fmt.Sprintf("resource safety: %d more keys undecided not listed", keys-c.listed)
		if len(undecided) != c.listed+1 || !strings.HasSuffix(undecided[c.listed], more) {
			t.Errorf("%v: %d resource lines on stderr, want %d keys and %q; stderr:\n%.2000s", c.args, len(undecided), c.listed, more, errs)
		}
		if len(errs) > 200*(c.listed+1)*9 {
			t.Errorf("%v: %d bytes on stderr", c.args, len(errs))
		}
		b, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Resource struct {
				UndecidedCount int               `json:"undecided_count"`
				Undecided      []json.RawMessage `json:"undecided"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		if res.Resource.UndecidedCount != keys || len(res.Resource.Undecided) != checker.MaxUndecided {
			t.Errorf("check.json: resource undecided_count %d, %d listed; want %d, %d", res.Resource.UndecidedCount, len(res.Resource.Undecided), keys, checker.MaxUndecided)
		}
	}
}

// TestTraceNamesTheFirstKeys: a trace module names at most --names-shown
// clients, keys and tokens in its comments (100 unless told; 0: all),
// then counts the rest. Before, it wrote a comment line per key and per
// token.
func TestTraceNamesTheFirstKeys(t *testing.T) {
	const keys = 2000
	path := manyKeys(t, keys)
	for _, c := range []struct {
		args   []string
		listed int
	}{
		{nil, defaultNamesShown},
		{[]string{"--names-shown", "0"}, keys},
	} {
		code, out, errs := runTraceArgs(t, append(c.args, path)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr %s", c.args, code, errs)
		}
		for _, what := range []string{"key", "token"} {
			n := strings.Count(out, "\n\\* "+what+" ")
			more := fmt.Sprintf("\n\\* ... and %d more %ss\n", keys-c.listed, what)
			if n != c.listed || (c.listed < keys) != strings.Contains(out, more) {
				t.Errorf("%v: %d %s comments; want %d and the rest counted (%q)", c.args, n, what, c.listed, more)
			}
		}
	}
}
