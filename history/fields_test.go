package history

import (
	"reflect"
	"testing"
)

// TestFieldTable: each field of the table has one name, the table fits a
// line's bits, and an op with every field
// set goes through AppendJSON and the decoder unchanged: a field missing
// from the table, or wired to the wrong member of Op, fails here.
func TestFieldTable(t *testing.T) {
	fs := fields()
	if numFields > 32 {
		t.Fatalf("%d fields; a line's bits hold 32", numFields)
	}
	seen := map[string]bool{}
	for _, f := range fs {
		if f.name == "" || seen[f.name] {
			t.Errorf("field %q: a name, once", f.name)
		}
		seen[f.name] = true
	}
	full := Op{Client: "c", Kind: Write, Key: "k", Name: "n", Evidence: "e", Call: 1, Return: 2, Completed: true, Result: OK,
		TTLMillis: 3, Token: 4, HasToken: true, Value: "v", HasValue: true, Prev: "p", HasPrev: true, Wait: true,
		ValidUntil: 5, HasValid: true, InLine: 6, HasInLine: true, Hold: 7, Checked: true, Deadline: 8, HasDeadline: true,
		Held: true, Holder: "h", HoldCount: 9, HasHolds: true, Records: 10, HasRecords: true, Bytes: 11, HasBytes: true,
		Mode: ModePermits, Permits: 12, Capacity: 13}
	line := AppendJSON(nil, full)
	var d decoder
	var got Op
	// The decoder validates too: a write carries none of the lock ops'
	// fields, so it is read unvalidated here, field by field.
	if err := d.parse(line, &got); err != nil && err.field == "" {
		t.Fatalf("%s: %v", line, err.msg)
	}
	if !reflect.DeepEqual(got, full) {
		t.Errorf("round trip of every field:\n%s\ngot  %+v\nwant %+v", line, got, full)
	}
	want := `{"client":"c","op":"write","key":"k","name":"n","evidence":"e","call":1,"return":2,"result":"ok","ttl_ms":3,"token":4,"value":"v","prev":"p","wait":true,"valid_until":5,"in_line":6,"lease":7,"checked":true,"deadline":8,"held":true,"holder":"h","holds":9,"records":10,"bytes":11,"mode":"permits","permits":12,"capacity":13}`
	if string(line) != want {
		t.Errorf("AppendJSON = %s\nwant          %s (the contract's order)", line, want)
	}
}

// TestKindBitsFollowTheOps: the carriers' op bits (kAcquire, ...) are the
// ops' places in opKinds, which kindBit reads: a list reordered without
// them would let ops carry each other's fields.
func TestKindBitsFollowTheOps(t *testing.T) {
	want := map[Kind]kindSet{Acquire: kAcquire, Release: kRelease, Renew: kRenew, Write: kWrite, Read: kRead, Fault: kFault,
		Lost: kLost, Close: kClose, Inspect: kInspect, Holds: kHolds, Footprint: kFootprint, TTL: kTTL}
	ks := opKinds()
	if len(want) != len(ks) {
		t.Fatalf("%d bits for %d ops", len(want), len(ks))
	}
	for _, k := range ks {
		if got := kindBit(k); got != want[k] {
			t.Errorf("kindBit(%s) = %b; want %b", k, got, want[k])
		}
	}
	if got := kindBit("nope"); got != 0 {
		t.Errorf("kindBit(nope) = %b; want 0", got)
	}
	if got := kindList(); got != "acquire, release, renew, write, read, fault, lost, close, inspect, holds, footprint or ttl" {
		t.Errorf("kindList() = %q", got)
	}
}
