package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while a Recorder writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

func TestRecorderConcurrentClients(t *testing.T) {
	var out syncBuffer
	rec := NewRecorder(&out, Options{})
	const clients, perClient = 8, 200
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprintf("c%d", c)
			for i := range perClient {
				tok := uint64(c*perClient + i + 1)
				p := rec.Invoke(Op{Client: client, Kind: Acquire, Key: "k", TTLMillis: 100})
				if err := p.Complete(OK, func(o *Op) { o.Token, o.HasToken = tok, true }); err != nil {
					t.Error(err)
					return
				}
				w := rec.Invoke(Op{Client: client, Kind: Write, Key: "k", Token: tok, HasToken: true, Value: client})
				if err := rec.Return(w, Op{Result: Rejected, Token: tok, HasToken: true, Value: client}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	end := rec.Fault("partition")
	end()
	end() // idempotent
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadAll(bytes.NewReader(out.Bytes()), "recorded")
	if err != nil {
		t.Fatal(err)
	}
	want := clients*perClient*2 + 1
	if len(ops) != want {
		t.Fatalf("file has %d ops, want %d", len(ops), want)
	}
	mem := rec.Ops()
	if len(mem) != want {
		t.Fatalf("Ops() has %d ops, want %d", len(mem), want)
	}
	// The file and memory hold the same ops (file order is completion order).
	key := func(o Op) string { o.Line = 0; return string(AppendJSON(nil, o)) }
	var a, b []string
	for i := range ops {
		a, b = append(a, key(ops[i])), append(b, key(mem[i]))
	}
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("file and memory differ: %s vs %s", a[i], b[i])
		}
	}
	tokens := map[uint64]bool{}
	lastCall := map[string]int64{}
	for _, o := range mem {
		if !o.Completed || o.Return < o.Call {
			t.Errorf("op %+v not completed after its call", o)
		}
		if o.Kind == Acquire {
			if tokens[o.Token] {
				t.Errorf("token %d recorded twice", o.Token)
			}
			tokens[o.Token] = true
		}
		if o.Kind == Write && (o.Result != Rejected || !o.HasValue || o.Value != o.Client) {
			t.Errorf("write recorded as %+v", o)
		}
		// One client's ops are sequential: each call is after its previous call.
		if o.Kind != Fault {
			if o.Call < lastCall[o.Client] {
				t.Errorf("client %s: call %d before previous call %d", o.Client, o.Call, lastCall[o.Client])
			}
			lastCall[o.Client] = o.Call
		}
	}
}

// A run that dies without Close leaves every completed op in the file.
func TestRecorderCrashSafety(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	rec := NewRecorder(f, Options{})
	for i := range 5 {
		p := rec.Invoke(Op{Client: "a", Kind: Renew, Key: "k", TTLMillis: 10, Token: uint64(i), HasToken: true})
		if err := p.Complete(Fail, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec.Invoke(Op{Client: "a", Kind: Acquire, Key: "k"}) // in flight when the "crash" happens
	// No Close: read what is on disk now.
	ops, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 5 {
		t.Fatalf("file has %d ops after a crash, want the 5 completed", len(ops))
	}
	for i, o := range ops {
		if o.Kind != Renew || o.Result != Fail || o.Token != uint64(i) || !o.Completed {
			t.Errorf("op %d = %+v", i, o)
		}
	}
}

func TestRecorderPendingAtClose(t *testing.T) {
	var out bytes.Buffer
	rec := NewRecorder(&out, Options{})
	done := rec.Invoke(Op{Client: "a", Kind: Acquire, Key: "k", TTLMillis: 100})
	pendAcq := rec.Invoke(Op{Client: "b", Kind: Acquire, Key: "k", TTLMillis: 100})
	pendRead := rec.Invoke(Op{Client: "c", Kind: Read, Key: "k", Token: 4, HasToken: true})
	rec.Fault("pause-server") // never ended
	if err := done.Complete(OK, func(o *Op) { o.Token, o.HasToken = 1, true }); err != nil {
		t.Fatal(err)
	}
	if got := rec.Ops(); len(got) != 4 || got[1].Completed || got[1].Result != Unknown {
		t.Fatalf("Ops before Close = %+v, want the pending acquire as unknown", got)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadAll(&out, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 {
		t.Fatalf("got %d ops, want 4: %+v", len(ops), ops)
	}
	if o := ops[0]; o.Client != "a" || !o.Completed || o.Result != OK || o.Token != 1 {
		t.Errorf("completed op = %+v", o)
	}
	if o := ops[1]; o.Client != "b" || o.Completed || o.Result != Unknown || o.TTLMillis != 100 || o.Call != pendAcq.Op().Call {
		t.Errorf("pending acquire = %+v, want no return, unknown, call %d", o, pendAcq.Op().Call)
	}
	if o := ops[2]; o.Client != "c" || o.Completed || o.Result != Unknown || !o.HasValue || o.Token != 4 {
		t.Errorf("pending read = %+v, want no return, unknown, value present", o)
	}
	if o := ops[3]; o.Kind != Fault || o.Name != "pause-server" || o.Completed {
		t.Errorf("pending fault = %+v, want an open window", o)
	}
	// Completing after Close: the op stays recorded as never completed.
	if err := pendRead.Complete(OK, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Complete after Close = %v, want ErrClosed", err)
	}
	if err := done.Complete(OK, nil); !errors.Is(err, ErrCompleted) {
		t.Errorf("second Complete = %v, want ErrCompleted", err)
	}
	if err := rec.Invoke(Op{Client: "d", Kind: Renew, Key: "k"}).Complete(OK, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Invoke+Complete after Close = %v, want ErrClosed", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestRecorderKeepsErrors(t *testing.T) {
	boom := errors.New("disk full")
	rec := NewRecorder(failingWriter{boom}, Options{})
	err := rec.Invoke(Op{Client: "a", Kind: Release, Key: "k"}).Complete(OK, nil)
	if !errors.Is(err, boom) {
		t.Errorf("Complete = %v, want the write error", err)
	}
	if len(rec.Ops()) != 1 {
		t.Errorf("op not kept in memory after a write error")
	}
	if err := rec.Close(); !errors.Is(err, boom) {
		t.Errorf("Close = %v, want the first write error", err)
	}

	rec = NewRecorder(nil, Options{})
	err = rec.Invoke(Op{Client: "a", Kind: Write, Key: "k"}).Complete(Fail, nil)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "result" {
		t.Errorf("invalid op = %v, want a ParseError on result", err)
	}
	if err := rec.Close(); !errors.As(err, &pe) {
		t.Errorf("Close = %v, want the validation error kept", err)
	}
}

func TestRecorderForgetOps(t *testing.T) {
	var out bytes.Buffer
	rec := NewRecorder(&out, Options{ForgetOps: true})
	if err := rec.Invoke(Op{Client: "a", Kind: Renew, Key: "k"}).Complete(OK, nil); err != nil {
		t.Fatal(err)
	}
	rec.Invoke(Op{Client: "b", Kind: Renew, Key: "k"})
	if got := rec.Ops(); len(got) != 1 || got[0].Client != "b" || got[0].Result != Unknown {
		t.Errorf("Ops with ForgetOps = %+v, want only the pending op", got)
	}
	if err := rec.Record(Op{Client: "z", Kind: Release, Key: "k", Call: 1, Return: 2, Completed: true, Result: Fail}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadAll(&out, "h")
	if err != nil || len(ops) != 3 {
		t.Fatalf("got %d ops, %v; want 3", len(ops), err)
	}
}

// TestRecorderLinesAreFileLines: ops complete out of invocation order, so
// the file is in completion order; each op the Recorder hands out carries
// the line it was written to, and reading the file back finds the same op
// on that line.
func TestRecorderLinesAreFileLines(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, Options{})
	a := r.Invoke(Op{Client: "a", Kind: Acquire, Key: "k", TTLMillis: 100})
	b := r.Invoke(Op{Client: "b", Kind: Acquire, Key: "k", TTLMillis: 100})
	c := r.Invoke(Op{Client: "c", Kind: Write, Key: "k", Value: "x"})
	end := r.Fault("pause")
	if err := c.Complete(OK, nil); err != nil { // third invoked, first written
		t.Fatal(err)
	}
	if err := a.Complete(Fail, nil); err != nil {
		t.Fatal(err)
	}
	end()
	if err := r.Record(Op{Client: "d", Kind: Read, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, Value: "x", HasValue: true}); err != nil {
		t.Fatal(err)
	}
	_ = b // still pending: written at Close, last
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	got := r.Ops()
	file, err := ReadAll(&buf, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(file) {
		t.Fatalf("%d ops recorded, %d in the file", len(got), len(file))
	}
	seen := map[int]bool{}
	for _, o := range got {
		if o.Line < 1 || o.Line > len(file) || seen[o.Line] {
			t.Fatalf("op %s by %q has line %d (file has %d lines, seen %v)", o.Kind, o.Client, o.Line, len(file), seen)
		}
		seen[o.Line] = true
		if f := file[o.Line-1]; f != o {
			t.Errorf("line %d: recorded %+v, file has %+v", o.Line, o, f)
		}
	}
	if got[2].Line != 1 || got[1].Line != len(file) {
		t.Errorf("write (completed first) on line %d, pending acquire on line %d; want 1 and %d", got[2].Line, got[1].Line, len(file))
	}
}

// TestWithdraw: a withdrawn op is neither written nor returned by Ops, and
// cannot complete afterwards; the ops around it keep their lines.
func TestWithdraw(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, Options{})
	a := r.Invoke(Op{Client: "a", Kind: Acquire, Key: "k", TTLMillis: 100})
	w := r.Invoke(Op{Client: "a", Kind: Renew, Key: "k", TTLMillis: 100})
	if !w.Withdraw() {
		t.Fatal("Withdraw of a pending op returned false")
	}
	if w.Withdraw() {
		t.Fatal("second Withdraw returned true")
	}
	if err := w.Complete(OK, nil); !errors.Is(err, ErrCompleted) {
		t.Fatalf("Complete after Withdraw: %v, want ErrCompleted", err)
	}
	if err := a.Complete(OK, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ops := r.Ops()
	if len(ops) != 1 || ops[0].Kind != Acquire || ops[0].Line != 1 {
		t.Fatalf("Ops() = %+v, want the acquire alone on line 1", ops)
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 || strings.Contains(buf.String(), "renew") {
		t.Fatalf("history %q: want one line, no renew", buf.String())
	}
}

// A fault window closed with evidence carries it in the file; the first
// end counts.
func TestRecorderFaultEvidence(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, Options{})
	end := r.FaultWindow("pause-client a")
	end("a: 2 of its calls held")
	end("ignored")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := ReadAll(&buf, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Evidence != "a: 2 of its calls held" || !ops[0].Completed {
		t.Fatalf("ops %+v; want one completed fault window with its evidence", ops)
	}
}

// TestRecorderRedacts: with Options.Redact, the texts that come from
// outside the harness (a fault's evidence quoting a server's error, the
// holder a lock names) are redacted in the file and in memory alike,
// whichever way the op is recorded; the rest is kept as given.
func TestRecorderRedacts(t *testing.T) {
	const pw = "s3cret-pw"
	var buf bytes.Buffer
	r := NewRecorder(&buf, Options{Redact: func(s string) string { return strings.ReplaceAll(s, pw, "[redacted]") }})
	end := r.FaultWindow("failover-skew")
	p := r.Invoke(Op{Client: "c1", Kind: Inspect, Key: "k"})
	if err := p.Complete(OK, func(o *Op) { o.Held, o.Holder = true, "holder "+pw }); err != nil {
		t.Fatal(err)
	}
	if err := r.Record(Op{Client: "c2", Kind: Inspect, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, Held: true, Holder: pw + "!"}); err != nil {
		t.Fatal(err)
	}
	end("read the clock: ERR invalid password " + pw)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), pw) {
		t.Errorf("the history holds the secret:\n%s", buf.String())
	}
	for _, o := range r.Ops() {
		if strings.Contains(o.Evidence+o.Holder, pw) {
			t.Errorf("an op in memory holds the secret: %+v", o)
		}
	}
	ops, err := ReadAll(&buf, "h")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"holder [redacted]": true, "[redacted]!": true, "read the clock: ERR invalid password [redacted]": true}
	for _, o := range ops {
		delete(want, o.Holder)
		delete(want, o.Evidence)
		if o.Key != "k" && o.Kind != Fault {
			t.Errorf("op %+v: its key changed", o)
		}
	}
	if len(want) > 0 {
		t.Errorf("not in the history as redacted: %v\n%s", want, buf.String())
	}
}

// TestDistinctStamps: on a virtual clock that stands still (a synctest
// bubble), a Distinct recorder still stamps every event later than the
// last, in the order they were stamped; a plain one stamps them alike.
func TestDistinctStamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plain := NewRecorder(nil, Options{})
		if a, b := plain.Now(), plain.Now(); a != b {
			t.Fatalf("a plain recorder's clock moved in a bubble: %d then %d", a, b)
		}
		r := NewRecorder(nil, Options{Distinct: true})
		p := r.Invoke(Op{Client: "a", Kind: Acquire, Key: "k"})
		if err := p.Complete(OK, nil); err != nil {
			t.Fatal(err)
		}
		q := r.Invoke(Op{Client: "b", Kind: Acquire, Key: "k"})
		if err := q.Complete(Fail, nil); err != nil {
			t.Fatal(err)
		}
		ops := r.Ops()
		if len(ops) != 2 || !(ops[0].Call < ops[0].Return && ops[0].Return < ops[1].Call && ops[1].Call < ops[1].Return) {
			t.Fatalf("stamps not apart in order: %+v", ops)
		}
		time.Sleep(time.Second)
		if now := r.Now(); now < int64(time.Second) {
			t.Fatalf("after a virtual second Now is %d", now)
		}
	})
}
