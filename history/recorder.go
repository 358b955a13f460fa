package history

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned when an op completes after its Recorder was closed
// (the op was then written as never completed).
var ErrClosed = errors.New("history recorder closed")

// ErrCompleted is returned when a pending op is completed twice.
var ErrCompleted = errors.New("op already completed")

// Options configure a Recorder.
type Options struct {
	// Base is time zero of the history's clock. Zero: the time NewRecorder
	// is called. It should carry a monotonic reading (come from time.Now).
	Base time.Time
	// ForgetOps stops the Recorder from keeping completed ops in memory:
	// Ops then returns only the pending ones. For runs of millions of ops
	// that are checked from the file.
	ForgetOps bool
	// Distinct makes Now return a later time on every call, at least 1ns
	// after the last. For a virtual clock (testing/synctest), which stands
	// still while goroutines run: a release, the hand-off it made and the
	// next holder's grant would otherwise share one instant, and a history
	// cannot order events its stamps cannot tell apart. Stamps taken in
	// that order keep it: an op stamped as returned before another was
	// called did return first.
	Distinct bool
	// Redact, when set, is applied to the text of every op that comes
	// from outside the recorder's caller (Evidence: a fault's report,
	// which may quote a server's error; Holder: whom a lock named) before
	// the op is kept or written: the runner passes its secrets'
	// redactor, so that no password reaches a history. Nil keeps them.
	Redact func(string) string
}

// Recorder records the operations of concurrent clients on one monotonic
// clock and streams them to a history: each op is written and flushed when
// it completes, so a run that crashes still leaves what it did. Ops that are
// still pending at Close are written then, without a return. A Recorder is
// safe for concurrent use.
type Recorder struct {
	base     time.Time
	forget   bool
	distinct bool
	redact   func(string) string // nil: none (Options.Redact)
	last     atomic.Int64        // the last time Now returned (Distinct)

	mu      sync.Mutex
	w       *Writer // nil: record in memory only
	ops     []Op
	pending map[*Pending]struct{}
	seq     uint64
	lines   int   // ops written so far: the next op goes on line lines+1
	dropped int   // ops withdrawn (Pending.Withdraw) still in ops
	err     error // first write or validation error
	closed  bool
}

// Pending is an invoked operation that has not completed yet.
type Pending struct {
	rec  *Recorder
	seq  uint64
	idx  int // index in rec.ops, -1 when ops are forgotten
	op   Op  // as invoked; never changed after Invoke
	done bool
}

// NewRecorder returns a Recorder writing to w; w may be nil to record in
// memory only. Close does not close w.
func NewRecorder(w io.Writer, opts Options) *Recorder {
	r := &Recorder{base: opts.Base, forget: opts.ForgetOps, distinct: opts.Distinct, redact: opts.Redact, pending: make(map[*Pending]struct{})}
	if r.base.IsZero() {
		r.base = time.Now()
	}
	if w != nil {
		r.w = NewWriter(w)
	}
	return r
}

// Now is the current time on the history's clock: nanoseconds since Base.
func (r *Recorder) Now() int64 {
	t := int64(time.Since(r.base))
	if !r.distinct {
		return t
	}
	for {
		last := r.last.Load()
		next := max(t, last+1)
		if r.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// pendingForm is how an op that never completed is recorded.
func pendingForm(op Op) Op {
	op.Completed, op.Return = false, 0
	if op.Kind != Fault {
		op.Result = Unknown
	}
	return op
}

// Invoke stamps op.Call with Now and returns the handle to complete it.
// Fill op with what is known at invocation (Client, Kind, Key, TTLMillis,
// Token and HasToken, Value, Prev and HasPrev...). Write and read ops always
// carry a value (HasValue is set). Until it completes, the op is recorded as
// never completed with result unknown.
func (r *Recorder) Invoke(op Op) *Pending {
	if op.Kind == Write || op.Kind == Read {
		op.HasValue = true
	}
	op.Line = 0
	op.Call = r.Now()
	r.clean(&op)
	p := &Pending{rec: r, op: op, idx: -1}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	p.seq = r.seq
	if r.closed {
		return p // Complete reports ErrClosed
	}
	r.pending[p] = struct{}{}
	if !r.forget {
		p.idx = len(r.ops)
		r.ops = append(r.ops, pendingForm(op))
	}
	return p
}

// Op returns the op as invoked, with its Call stamp.
func (p *Pending) Op() Op { return p.op }

// Complete stamps the op's return with Now, sets its result, lets edit (if
// not nil) fill what was learnt (a token, the value read...), then writes and
// flushes it. A fault window completes with result "". The error (also kept
// for Close) says why the op could not be recorded: invalid, already
// completed, recorder closed, or a write error.
func (p *Pending) Complete(result Result, edit func(*Op)) error {
	r := p.rec
	op := p.op
	op.Return, op.Completed = r.Now(), true
	op.Result = result
	if edit != nil {
		edit(&op)
	}
	op.Line = 0
	r.clean(&op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.done {
		return fmt.Errorf("complete %s %q by %q: %w", op.Kind, op.Key, op.Client, ErrCompleted)
	}
	if r.closed {
		return fmt.Errorf("complete %s %q by %q: %w", op.Kind, op.Key, op.Client, ErrClosed)
	}
	p.done = true
	delete(r.pending, p)
	if err := op.Validate(); err != nil {
		err = fmt.Errorf("record %s %q by %q: %w", op.Kind, op.Key, op.Client, err)
		r.keep(err)
		if p.idx >= 0 {
			r.ops[p.idx] = op // kept in memory so the bad op can be inspected
		}
		return err
	}
	op.Line = r.nextLine()
	if p.idx >= 0 {
		r.ops[p.idx] = op
	}
	return r.write(op, true)
}

// Withdraw takes back an op that surely never happened: the client found,
// after invoking it, that it sent nothing (the lock lacks the operation:
// locker.ErrUnsupported). The op is not written and leaves Ops. It reports
// false when the op already completed or the recorder is closed.
func (p *Pending) Withdraw() bool {
	r := p.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.done || r.closed {
		return false
	}
	p.done = true
	delete(r.pending, p)
	if p.idx >= 0 {
		r.ops[p.idx] = Op{} // a hole, skipped by Ops
		r.dropped++
	}
	return true
}

// Return completes p with op's result and fields (op's Call and the
// identity fields of the invocation are kept): a shorthand for Complete.
func (r *Recorder) Return(p *Pending, op Op) error {
	return p.Complete(op.Result, func(o *Op) {
		o.Token, o.HasToken = op.Token, op.HasToken
		o.Value, o.HasValue = op.Value, op.HasValue || o.Kind == Write || o.Kind == Read
		o.Prev, o.HasPrev = op.Prev, op.HasPrev
		if op.TTLMillis != 0 {
			o.TTLMillis = op.TTLMillis
		}
	})
}

// Fault records a fault window named name starting now; call end when the
// fault is lifted (end may be called more than once). A window never ended
// is written at Close without a return. Errors are kept for Close.
func (r *Recorder) Fault(name string) (end func()) {
	endWith := r.FaultWindow(name)
	return func() { endWith("") }
}

// FaultWindow is Fault whose end also records the fault's evidence: what
// it did, in one sentence (Op.Evidence; "" for none). Only the first call
// of end counts.
func (r *Recorder) FaultWindow(name string) (end func(evidence string)) {
	p := r.Invoke(Op{Kind: Fault, Name: name})
	var once sync.Once
	return func(evidence string) {
		once.Do(func() {
			_ = p.Complete("", func(o *Op) { o.Evidence = evidence })
		})
	}
}

// Record writes op as given (already stamped, e.g. replayed from elsewhere).
func (r *Recorder) Record(op Op) error {
	op.Line = 0
	r.clean(&op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("record %s %q by %q: %w", op.Kind, op.Key, op.Client, ErrClosed)
	}
	if err := op.Validate(); err != nil {
		err = fmt.Errorf("record %s %q by %q: %w", op.Kind, op.Key, op.Client, err)
		r.keep(err)
		return err
	}
	op.Line = r.nextLine()
	if !r.forget {
		r.ops = append(r.ops, op)
	}
	return r.write(op, true)
}

// clean redacts op's text from outside (Options.Redact), in memory as in
// the file: what the checker judges is what a reader of the file reads.
func (r *Recorder) clean(op *Op) {
	if r.redact == nil {
		return
	}
	if op.Evidence != "" {
		op.Evidence = r.redact(op.Evidence)
	}
	if op.Holder != "" {
		op.Holder = r.redact(op.Holder)
	}
}

// nextLine numbers the op about to be written; r.mu is held. Ops are
// written as they complete, so a file line is not the invocation order:
// the op carries its line so that whatever cites it (a violation, a report)
// names the line a reader of the file sees.
func (r *Recorder) nextLine() int {
	r.lines++
	return r.lines
}

// write appends op to the stream; r.mu is held.
func (r *Recorder) write(op Op, flush bool) error {
	if r.w == nil {
		return nil
	}
	if err := r.w.WriteOp(op); err != nil {
		r.keep(err)
		return err
	}
	if flush {
		if err := r.w.Flush(); err != nil {
			r.keep(err)
			return err
		}
	}
	return nil
}

func (r *Recorder) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Err returns the first error met while recording, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Ops returns a copy of every op recorded so far, in invocation order;
// pending ones appear as never completed with result unknown. Each op
// written has Line set to its line in the history as written (1-based,
// counting the ops the Recorder wrote); a pending op has Line 0 until Close
// writes it.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forget {
		out := make([]Op, 0, len(r.pending))
		for _, p := range r.sortedPending() {
			out = append(out, pendingForm(p.op))
		}
		return out
	}
	out := make([]Op, 0, len(r.ops)-r.dropped)
	for _, o := range r.ops {
		if o.Kind != "" {
			out = append(out, o)
		}
	}
	return out
}

func (r *Recorder) sortedPending() []*Pending {
	ps := make([]*Pending, 0, len(r.pending))
	for p := range r.pending {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].seq < ps[j].seq })
	return ps
}

// Close writes the ops still pending, without a return (as unknown), flushes,
// and returns the first error met while recording. Later calls return the
// same error; ops completed after Close get ErrClosed.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.err
	}
	r.closed = true
	for _, p := range r.sortedPending() {
		op := pendingForm(p.op)
		if err := op.Validate(); err != nil {
			r.keep(fmt.Errorf("record pending %s %q by %q: %w", op.Kind, op.Key, op.Client, err))
			continue
		}
		op.Line = r.nextLine()
		if p.idx >= 0 {
			r.ops[p.idx] = op
		}
		_ = r.write(op, false) // kept in r.err
	}
	clear(r.pending)
	if r.w != nil {
		if err := r.w.Flush(); err != nil {
			r.keep(err)
		}
	}
	return r.err
}
