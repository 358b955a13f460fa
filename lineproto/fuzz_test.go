package lineproto

import (
	"testing"
)

// FuzzParseLine: any line a lock process writes to its stdout never panics
// the reader, and a line it accepts keeps the protocol's rules
// (docs/LINEPROTO.md, "Fields of a line"): an event has a known name and
// no id, a reply has an id and a result the protocol knows, no validity
// or time spent below 0. Seeds: lines of each kind, good and bad.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"result":"ok","lease":3,"fence":17,"valid_ms":480}`,
		`{"id":1,"result":"ok","version":2,"lock":"x","ops":["acquire","release"],"modes":["read","write"]}`,
		`{"event":"lost","lease":3}`,
		`{"event":"renewing","lease":3,"renewal":1,"ttl_ms":500}`,
		`{"event":"renewed","renewal":1,"result":"ok"}`,
		`{"id":0,"result":"ok"}`,
		`{"id":1,"result":"maybe"}`,
		`{"id":1,"result":"ok","valid_ms":-1}`,
		`{"id":-1}`,
		`[1,2]`,
		`{"id":1,"result":"ok","fence":1.5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, bad := parseLine(b)
		if bad != "" {
			return
		}
		if r.ValidMillis != nil && *r.ValidMillis < 0 || r.TookMicros < 0 {
			t.Fatalf("accepted a negative time: %+v", r)
		}
		if r.Event != "" {
			if r.ID != 0 || (r.Event != EventLost && r.Event != EventRenewing && r.Event != EventRenewed) {
				t.Fatalf("accepted event %+v", r)
			}
			return
		}
		if r.ID == 0 || (!validResult(r.Result) && r.Result != ResultUnsupported) {
			t.Fatalf("accepted reply %+v", r)
		}
	})
}
