package history

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrBadInput is the sentinel of every history that breaks the contract:
// errors.Is(err, ErrBadInput) holds for each *ParseError.
var ErrBadInput = errors.New("bad history")

// ParseError says where a history breaks the contract and what is wrong.
type ParseError struct {
	File  string // the file (or name given to ReadAll); "" for an op not read from a file
	Line  int    // 1-based line; 0 when unknown
	Field string // the JSON field at fault; "" for malformed JSON
	Msg   string // what is wrong
}

// Error formats the error as "file:line: field: message".
func (e *ParseError) Error() string {
	var b []byte
	switch {
	case e.File != "" && e.Line > 0:
		b = fmt.Appendf(b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b = fmt.Appendf(b, "%s: ", e.File)
	case e.Line > 0:
		b = fmt.Appendf(b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b = append(b, e.Field...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	return string(b)
}

// Unwrap returns ErrBadInput, so that errors.Is(err, ErrBadInput) holds.
func (e *ParseError) Unwrap() error { return ErrBadInput }

// Validate checks op against the history contract and returns a *ParseError
// naming the first field at fault (with op.Line), or nil. The rules:
//
//   - op is one of acquire, release, renew, write, read, fault, lost, close,
//     inspect, holds, footprint, ttl;
//   - a fault needs name and may carry client, key and a result; other ops
//     need client, key and result and carry no name;
//   - result is ok, fail or unknown for acquire, release and renew; ok,
//     rejected or unknown for write and read;
//   - call and return are in [0, MaxTime) and return is not before call;
//   - an op that never completed (no return) has result unknown. A completed
//     op may be unknown too: a client that timed out returned without
//     learning the outcome;
//   - token only on acquire, release, renew, write and read;
//   - ttl_ms only on acquire and renew, in [0, MaxTTLMillis];
//   - value only on write and read; a write always carries it, and so does an
//     ok read ("" when the resource was never written);
//   - prev only on write; wait only on acquire;
//   - a lost op (a loss notice) has result ok and completes at its call;
//   - valid_until only on acquire, renew, release, write and ok ttl, in
//     [0, MaxTime);
//   - lease (>= 1) on any op but fault; checked only on write;
//   - in_line only on a blocking acquire (wait), from its call to its
//     return;
//   - close (a client closing its lock handle) has the results of a lock
//     op (ok, fail, unknown) and carries no token or lease;
//   - deadline on any op but fault and lost, in [0, MaxTime) (it may come
//     before the call: a context that had already expired);
//   - inspect and holds (a client asking the lock who holds the key, and
//     how many holds it has itself) have the results of a lock op and
//     carry no lease or ttl_ms; held, holder and token only on inspect,
//     holder and token only with held; holds (>= 0) only on inspect and
//     holds, and an ok holds op carries it;
//   - footprint (a client's sample of the lock's keys) has the results of
//     a lock op and carries no token, lease, ttl_ms or wait; records and
//     bytes (>= 0) only on footprint, and an ok footprint carries records;
//   - ttl (a client asking its lock's server how long its lease is still
//     valid) has the results of a lock op and carries no ttl_ms; it may
//     carry token, lease and deadline, and valid_until only when ok;
//   - mode (read, write, permits) only on acquire, release, renew, lost
//     and ttl; permits (>= 1) only with mode permits; capacity (>= the
//     permits) only on an acquire of mode permits, and every such acquire
//     carries it.
func (op Op) Validate() error {
	if err := validate(&op, true, op.TTLMillis != 0); err != nil {
		return &ParseError{Line: op.Line, Field: err.field, Msg: err.msg}
	}
	return nil
}

// MaxTime bounds the times of a history (ns, exclusive): 2^61, about 73
// years from its start. A time and a lease length added stay below 2^62,
// so no sum the checker forms reaches the values it keeps for "never", and
// a history near the bound is judged as the same history near 0 is. A
// later time is bad input, never a silent pass.
const MaxTime = int64(1) << 61

// MaxTTLMillis bounds ttl_ms: 2^40 ms, about 34 years (twice it in ns,
// the most a drift below 1 can stretch it, stays below 2^61).
const MaxTTLMillis = int64(1) << 40

func bad(field, format string, args ...any) *fieldError {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// validate implements Validate; hasCall and hasTTL say whether the fields
// were present on the line (a zero value cannot tell).
func validate(o *Op, hasCall, hasTTL bool) *fieldError {
	switch o.Kind {
	case Acquire, Release, Renew, Write, Read, Fault, Lost, Close, Inspect, Holds, Footprint, TTL:
	case "":
		return bad("op", "missing (want acquire, release, renew, write, read, fault, lost, close, inspect, holds, footprint or ttl)")
	default:
		return bad("op", "unknown operation %q (want acquire, release, renew, write, read, fault, lost, close, inspect, holds, footprint or ttl)", o.Kind)
	}
	lockOp := o.Kind == Acquire || o.Kind == Release || o.Kind == Renew || o.Kind == Close || o.Kind == Inspect || o.Kind == Holds || o.Kind == Footprint || o.Kind == TTL
	if o.Kind == Fault {
		if o.Name == "" {
			return bad("name", "missing (a fault names its window)")
		}
		switch o.Result {
		case "", OK, Fail, Rejected, Unknown:
		default:
			return bad("result", "unknown result %q", o.Result)
		}
	} else {
		if o.Name != "" {
			return bad("name", "only fault ops carry a name, not %s", o.Kind)
		}
		if o.Evidence != "" {
			return bad("evidence", "only fault ops carry evidence, not %s", o.Kind)
		}
		if o.Client == "" {
			return bad("client", "missing")
		}
		if o.Key == "" {
			return bad("key", "missing")
		}
		switch {
		case o.Result == "":
			return bad("result", "missing")
		case o.Kind == Lost && o.Result != OK:
			return bad("result", "%q is not a result of lost (a loss notice is ok)", o.Result)
		case lockOp && o.Result != OK && o.Result != Fail && o.Result != Unknown:
			return bad("result", "%q is not a result of %s (want ok, fail or unknown)", o.Result, o.Kind)
		case !lockOp && o.Kind != Lost && o.Result != OK && o.Result != Rejected && o.Result != Unknown:
			return bad("result", "%q is not a result of %s (want ok, rejected or unknown)", o.Result, o.Kind)
		}
	}
	if !hasCall {
		return bad("call", "missing")
	}
	if o.Call < 0 {
		return bad("call", "negative time %d", o.Call)
	}
	if o.Call >= MaxTime {
		return bad("call", "time %d is not below %d (2^61 ns, about 73 years from the history's start)", o.Call, MaxTime)
	}
	if o.Completed {
		if o.Return < 0 {
			return bad("return", "negative time %d", o.Return)
		}
		if o.Return >= MaxTime {
			return bad("return", "time %d is not below %d (2^61 ns, about 73 years from the history's start)", o.Return, MaxTime)
		}
		if o.Return < o.Call {
			return bad("return", "%d is before call %d", o.Return, o.Call)
		}
	} else if o.Kind != Fault && o.Result != Unknown {
		return bad("return", "missing on %s with result %q: an op that never completed must be unknown", o.Kind, o.Result)
	}
	if o.HasToken && o.Kind == Fault {
		return bad("token", "fault ops carry no token")
	}
	if hasTTL && o.Kind != Acquire && o.Kind != Renew {
		return bad("ttl_ms", "only acquire and renew carry a lease length, not %s", o.Kind)
	}
	if o.TTLMillis < 0 {
		return bad("ttl_ms", "negative lease length %s", strconv.FormatInt(o.TTLMillis, 10))
	}
	if o.TTLMillis > MaxTTLMillis {
		return bad("ttl_ms", "lease length %d is above %d (2^40 ms, about 34 years)", o.TTLMillis, MaxTTLMillis)
	}
	if o.HasValue && o.Kind != Write && o.Kind != Read {
		return bad("value", "only write and read carry a value, not %s", o.Kind)
	}
	if !o.HasValue {
		if o.Kind == Write {
			return bad("value", "missing (a write says what it wrote)")
		}
		if o.Kind == Read && o.Result == OK {
			return bad("value", `missing (an ok read says what it saw; "" when never written)`)
		}
	}
	if o.Wait && o.Kind != Acquire {
		return bad("wait", "only acquire carries wait, not %s", o.Kind)
	}
	if o.HasPrev && o.Kind != Write {
		return bad("prev", "only write carries prev, not %s", o.Kind)
	}
	if o.Kind == Lost && (!o.Completed || o.Return != o.Call) {
		return bad("return", "a loss notice is an instant: its return equals its call")
	}
	if o.HasValid {
		switch {
		case o.Kind != Acquire && o.Kind != Renew && o.Kind != Release && o.Kind != Write && o.Kind != TTL:
			return bad("valid_until", "only acquire, renew, release, write and ttl carry a claimed validity, not %s", o.Kind)
		case o.Kind == TTL && o.Result != OK:
			return bad("valid_until", "a ttl op carries the time left only when the lock answered (ok), not %s", o.Result)
		case o.ValidUntil < 0:
			return bad("valid_until", "negative time %d", o.ValidUntil)
		case o.ValidUntil >= MaxTime:
			return bad("valid_until", "time %d is not below %d (2^61 ns)", o.ValidUntil, MaxTime)
		}
	}
	if o.Lease != 0 && o.Kind == Fault {
		return bad("lease", "fault ops carry no lease")
	}
	if o.Checked && o.Kind != Write {
		return bad("checked", "only write carries checked, not %s", o.Kind)
	}
	if o.HasDeadline {
		switch {
		case o.Kind == Fault || o.Kind == Lost:
			return bad("deadline", "%s ops carry no deadline (they are not calls)", o.Kind)
		case o.Deadline < 0:
			return bad("deadline", "negative time %d", o.Deadline)
		case o.Deadline >= MaxTime:
			return bad("deadline", "time %d is not below %d (2^61 ns)", o.Deadline, MaxTime)
		}
	}
	if o.Kind == Close && (o.HasToken || o.Lease != 0) {
		return bad("token", "a close is of the client's handle, not of a lease: it carries no token or lease")
	}
	if (o.Held || o.Holder != "") && o.Kind != Inspect {
		return bad("held", "only inspect carries held and holder, not %s", o.Kind)
	}
	if o.Holder != "" && !o.Held {
		return bad("holder", "a holder without held: the lock named a holder of a key it said was free")
	}
	if o.Kind == Inspect && o.HasToken && !o.Held {
		return bad("token", "an inspect carries its holder's token only when the key is held")
	}
	if o.Kind == Holds && o.HasToken {
		return bad("token", "a holds op carries no token")
	}
	if (o.Kind == Inspect || o.Kind == Holds) && o.Lease != 0 {
		return bad("lease", "%s asks about the key, not a lease: it carries no lease", o.Kind)
	}
	if o.HasHolds {
		switch {
		case o.Kind != Inspect && o.Kind != Holds:
			return bad("holds", "only inspect and holds carry a hold count, not %s", o.Kind)
		case o.HoldCount < 0:
			return bad("holds", "negative count %d", o.HoldCount)
		}
	} else if o.Kind == Holds && o.Result == OK {
		return bad("holds", "missing (an ok holds op says the count)")
	}
	if o.Kind == Footprint && (o.HasToken || o.Lease != 0) {
		return bad("token", "a footprint samples the key, not a lease: it carries no token or lease")
	}
	for _, f := range []struct {
		name    string
		has     bool
		v       int64
		missing bool
	}{
		{"records", o.HasRecords, o.Records, o.Kind == Footprint && o.Result == OK},
		{"bytes", o.HasBytes, o.Bytes, false},
	} {
		switch {
		case f.has && o.Kind != Footprint:
			return bad(f.name, "only footprint carries %s, not %s", f.name, o.Kind)
		case f.has && f.v < 0:
			return bad(f.name, "negative count %d", f.v)
		case !f.has && f.missing:
			return bad(f.name, "missing (an ok footprint says what it measured)")
		}
	}
	if o.HasInLine {
		switch {
		case o.Kind != Acquire || !o.Wait:
			return bad("in_line", "only a blocking acquire (wait) is in line")
		case o.InLine < o.Call:
			return bad("in_line", "%d is before call %d", o.InLine, o.Call)
		case o.Completed && o.InLine > o.Return:
			return bad("in_line", "%d is after return %d", o.InLine, o.Return)
		case o.InLine >= MaxTime:
			return bad("in_line", "time %d is not below %d (2^61 ns)", o.InLine, MaxTime)
		}
	}
	return validateMode(o)
}

// validateMode checks mode, permits and capacity (see Op.Mode).
func validateMode(o *Op) *fieldError {
	if o.Mode != "" {
		switch o.Mode {
		case ModeRead, ModeWrite, ModePermits:
		default:
			return bad("mode", "unknown mode %q (want read, write or permits; leave it out for an exclusive hold)", o.Mode)
		}
		switch o.Kind {
		case Acquire, Release, Renew, Lost, TTL:
		default:
			return bad("mode", "only acquire, release, renew, lost and ttl carry a mode, not %s", o.Kind)
		}
	}
	if o.Permits != 0 {
		switch {
		case o.Mode != ModePermits:
			return bad("permits", "only a permits hold (mode permits) carries permits")
		case o.Permits < 1:
			return bad("permits", "%d permits: want at least 1", o.Permits)
		}
	}
	if o.Capacity != 0 {
		switch {
		case o.Mode != ModePermits || o.Kind != Acquire:
			return bad("capacity", "only an acquire of permits (mode permits) carries capacity")
		case o.Capacity < max(o.Permits, 1):
			return bad("capacity", "capacity %d is below the %d permits asked for", o.Capacity, max(o.Permits, 1))
		}
	}
	if o.Mode == ModePermits && o.Kind == Acquire && o.Capacity == 0 {
		return bad("capacity", "missing (an acquire of permits says the semaphore's N)")
	}
	return nil
}
