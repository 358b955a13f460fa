package history

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
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
	seen := bit(numFields) - 1 // every field may be present: get says which is
	if op.TTLMillis == 0 {
		seen &^= bit(fTTL) // a zero lease length is absent, as AppendJSON writes it
	}
	if err := validate(&op, seen); err != nil {
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

// validate implements Validate; seen are the fields present on the line
// (bit): call and ttl_ms are present there even when zero, which a zero
// value cannot tell, and no field outside seen is. Which ops may carry a
// field, and how its number is bounded, is the field table's (carriers);
// what is left here relates fields to each other.
func validate(o *Op, seen uint32) *fieldError {
	kb := kindBit(o.Kind)
	if kb == 0 {
		if o.Kind == "" {
			return bad("op", "missing (want %s)", kindList())
		}
		return bad("op", "unknown operation %q (want %s)", o.Kind, kindList())
	}
	if err := validateResult(o, kb); err != nil {
		return err
	}
	if seen&bit(fCall) == 0 {
		return bad("call", "missing")
	}
	if !o.Completed && o.Kind != Fault && o.Result != Unknown {
		return bad("return", "missing on %s with result %q: an op that never completed must be unknown", o.Kind, o.Result)
	}
	if o.Kind == Lost && (!o.Completed || o.Return != o.Call) {
		return bad("return", "a loss notice is an instant: its return equals its call")
	}
	if err := validateCarriers(o, kb, seen); err != nil {
		return err
	}
	if o.Completed && o.Return < o.Call {
		return bad("return", "%d is before call %d", o.Return, o.Call)
	}
	if err := validateRequired(o); err != nil {
		return err
	}
	if o.HasInLine {
		switch {
		case !o.Wait:
			return bad("in_line", "only a blocking acquire (wait) is in line")
		case o.InLine < o.Call:
			return bad("in_line", "%d is before call %d", o.InLine, o.Call)
		case o.Completed && o.InLine > o.Return:
			return bad("in_line", "%d is after return %d", o.InLine, o.Return)
		}
	}
	return validateMode(o)
}

// kindList names the ops, for an error: "acquire, ... or ttl".
func kindList() string {
	ks := opKinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kindSet is a set of op kinds, a bit each (kindBit).
type kindSet uint16

// The ops' bits, in opKinds' order (TestKindBitsFollowTheOps).
const (
	kAcquire kindSet = 1 << iota
	kRelease
	kRenew
	kWrite
	kRead
	kFault
	kLost
	kClose
	kInspect
	kHolds
	kFootprint
	kTTL
)

// kindBit is op kind k's bit, its place in the contract's ops
// (opKinds); 0 for no op of the contract.
func kindBit(k Kind) kindSet {
	for i, c := range opKinds() {
		if k == c {
			return 1 << i
		}
	}
	return 0
}

// numRule is how a field's number is bounded.
type numRule uint8

const (
	anyNum   numRule = iota
	timeNum          // a time: in [0, MaxTime)
	countNum         // a count: >= 0
	ttlNum           // a lease length: in [0, MaxTTLMillis]
)

// carrier is the validation column of the field table (fields), by the
// same fieldID: the ops that may carry the field (0: any), told in only
// when another op does, and how its number is bounded.
type carrier struct {
	on   kindSet
	only string
	num  numRule
}

// carriers is who may carry each field, and its bounds: the history
// contract's rules of one field each (Validate's doc).
func carriers() [numFields]carrier {
	lease := kAcquire | kRelease | kRenew | kWrite | kRead | kLost | kTTL
	return [numFields]carrier{
		fName:     {on: kFault, only: "only fault ops carry a name"},
		fEvidence: {on: kFault, only: "only fault ops carry evidence"},
		fCall:     {num: timeNum},
		fReturn:   {num: timeNum},
		fTTL:      {on: kAcquire | kRenew, only: "only acquire and renew carry a lease length", num: ttlNum},
		fToken:    {on: lease | kInspect, only: "only acquire, release, renew, write, read, lost, inspect and ttl carry a token"},
		fValue:    {on: kWrite | kRead, only: "only write and read carry a value"},
		fPrev:     {on: kWrite, only: "only write carries prev"},
		fWait:     {on: kAcquire, only: "only acquire carries wait"},
		fValid:    {on: kAcquire | kRenew | kRelease | kWrite | kTTL, only: "only acquire, renew, release, write and ttl carry a claimed validity", num: timeNum},
		fInLine:   {on: kAcquire, only: "only a blocking acquire (wait) is in line", num: timeNum},
		fLease:    {on: lease, only: "only acquire, release, renew, write, read, lost and ttl carry a lease"},
		fChecked:  {on: kWrite, only: "only write carries checked"},
		fDeadline: {on: ^(kFault | kLost), num: timeNum},
		fHeld:     {on: kInspect, only: "only inspect carries held and holder"},
		fHolder:   {on: kInspect, only: "only inspect carries held and holder"},
		fHolds:    {on: kInspect | kHolds, only: "only inspect and holds carry a hold count", num: countNum},
		fRecords:  {on: kFootprint, only: "only footprint carries records", num: countNum},
		fBytes:    {on: kFootprint, only: "only footprint carries bytes", num: countNum},
		fMode:     {on: kAcquire | kRelease | kRenew | kLost | kTTL, only: "only acquire, release, renew, lost and ttl carry a mode"},
	}
}

// refusal is why op kind k may not carry field id: the ops that may
// (c.only), or, where the op's nature is the reason, that.
func refusal(id fieldID, k Kind, c carrier) string {
	noLease := id == fToken || id == fLease
	switch {
	case id == fDeadline:
		return fmt.Sprintf("%s ops carry no deadline (they are not calls)", k)
	case noLease && k == Fault:
		return fmt.Sprintf("fault ops carry no %s", fieldName(id))
	case noLease && k == Close:
		return "a close is of the client's handle, not of a lease: it carries no token or lease"
	case noLease && k == Footprint:
		return "a footprint samples the key, not a lease: it carries no token or lease"
	case id == fToken && k == Holds:
		return "a holds op carries no token"
	case id == fLease && (k == Inspect || k == Holds):
		return fmt.Sprintf("%s asks about the key, not a lease: it carries no lease", k)
	}
	return fmt.Sprintf("%s, not %s", c.only, k)
}

// validateCarriers checks each field o carries against its carrier: the
// op (its bit kb) may carry it, and its number is in bounds. Only the fields seen are
// looked at (most lines carry a third of them).
func validateCarriers(o *Op, kb kindSet, seen uint32) *fieldError {
	cs := carriers()
	for m := seen; m != 0; m &= m - 1 {
		id := fieldID(bits.TrailingZeros32(m))
		present, _, i, _ := o.get(id)
		if id == fTTL {
			present = true // seen: ttl_ms was on the line, zero or not
		}
		if !present {
			continue
		}
		c := cs[id]
		if c.on != 0 && c.on&kb == 0 {
			return bad(fieldName(id), "%s", refusal(id, o.Kind, c))
		}
		switch {
		case c.num == timeNum && i < 0:
			return bad(fieldName(id), "negative time %d", i)
		case c.num == ttlNum && i < 0:
			return bad(fieldName(id), "negative lease length %d", i)
		case c.num == timeNum && i >= MaxTime:
			return bad(fieldName(id), "time %d is not below %d (2^61 ns, about 73 years from the history's start)", i, MaxTime)
		case c.num == ttlNum && i > MaxTTLMillis:
			return bad(fieldName(id), "lease length %d is above %d (2^40 ms, about 34 years)", i, MaxTTLMillis)
		case c.num == countNum && i < 0:
			return bad(fieldName(id), "negative count %d", i)
		}
	}
	return nil
}

// fieldName is field id's JSON name.
func fieldName(id fieldID) string { return fields()[id].name }

// validateResult checks a fault's name and result, and the client, key
// and result every other op has (kb: the op's bit).
func validateResult(o *Op, kb kindSet) *fieldError {
	lockOp := kb&(kAcquire|kRelease|kRenew|kClose|kInspect|kHolds|kFootprint|kTTL) != 0
	switch {
	case o.Kind == Fault && o.Name == "":
		return bad("name", "missing (a fault names its window)")
	case o.Kind == Fault && o.Result != "" && o.Result != OK && o.Result != Fail && o.Result != Rejected && o.Result != Unknown:
		return bad("result", "unknown result %q", o.Result)
	case o.Kind == Fault:
		return nil
	case o.Client == "":
		return bad("client", "missing")
	case o.Key == "":
		return bad("key", "missing")
	case o.Result == "":
		return bad("result", "missing")
	case o.Kind == Lost && o.Result != OK:
		return bad("result", "%q is not a result of lost (a loss notice is ok)", o.Result)
	case lockOp && o.Result != OK && o.Result != Fail && o.Result != Unknown:
		return bad("result", "%q is not a result of %s (want ok, fail or unknown)", o.Result, o.Kind)
	case !lockOp && o.Kind != Lost && o.Result != OK && o.Result != Rejected && o.Result != Unknown:
		return bad("result", "%q is not a result of %s (want ok, rejected or unknown)", o.Result, o.Kind)
	}
	return nil
}

// validateRequired checks the fields an op must carry, and those that
// depend on another field or on the result.
func validateRequired(o *Op) *fieldError {
	switch {
	case o.Kind == Write && !o.HasValue:
		return bad("value", "missing (a write says what it wrote)")
	case o.Kind == Read && o.Result == OK && !o.HasValue:
		return bad("value", `missing (an ok read says what it saw; "" when never written)`)
	case o.Kind == TTL && o.HasValid && o.Result != OK:
		return bad("valid_until", "a ttl op carries the time left only when the lock answered (ok), not %s", o.Result)
	case o.Holder != "" && !o.Held:
		return bad("holder", "a holder without held: the lock named a holder of a key it said was free")
	case o.Kind == Inspect && o.HasToken && !o.Held:
		return bad("token", "an inspect carries its holder's token only when the key is held")
	case o.Kind == Holds && o.Result == OK && !o.HasHolds:
		return bad("holds", "missing (an ok holds op says the count)")
	case o.Kind == Footprint && o.Result == OK && !o.HasRecords:
		return bad("records", "missing (an ok footprint says what it measured)")
	}
	return nil
}

// validateMode checks mode, permits and capacity (see Op.Mode).
func validateMode(o *Op) *fieldError {
	switch o.Mode {
	case "", ModeRead, ModeWrite, ModePermits:
	default:
		return bad("mode", "unknown mode %q (want read, write or permits; leave it out for an exclusive hold)", o.Mode)
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
