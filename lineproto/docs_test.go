package lineproto

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// docExample is one line of a ```jsonc block of docs/LINEPROTO.md, with
// what the comment above it says it is.
type docExample struct {
	line    int    // 1-based line of the page
	text    string // the example line
	invalid bool   // "// invalid ...": the harness refuses it
	kind    string // request, reply or event
	name    string // the op (request, reply) or event; "" for an invalid event
	fenced  bool   // "reply to OP, fenced": the lock's hello said fenced
	want    string // invalid: the error the harness gives
}

// docExamples reads every example line of the page's ```jsonc blocks.
// A comment line says what the lines under it are:
//
//	// request OP
//	// reply to OP[, fenced]
//	// event NAME
//	// invalid reply to OP[, fenced]: ERROR
//	// invalid event: ERROR
func docExamples(t *testing.T, page string) []docExample {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []docExample
		in      bool
		cur     *docExample
		nblocks int
	)
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		switch {
		case !in && strings.HasPrefix(line, "```jsonc"):
			in, cur = true, nil
			nblocks++
			continue
		case !in && strings.HasPrefix(line, "```json"):
			t.Errorf("%s:%d: a ```json block: write the protocol's examples in ```jsonc blocks, with a comment saying what each line is", page, n)
			continue
		case !in:
			continue
		case line == "```":
			in = false
			continue
		case strings.TrimSpace(line) == "":
			t.Errorf("%s:%d: an empty line in an examples block", page, n)
			continue
		}
		if c, ok := strings.CutPrefix(line, "// "); ok {
			ex, err := parseDocComment(c)
			if err != "" {
				t.Errorf("%s:%d: comment %q: %s", page, n, line, err)
				cur = nil
				continue
			}
			cur = &ex
			continue
		}
		if cur == nil {
			t.Errorf("%s:%d: example %q has no comment above it saying what it is", page, n, line)
			continue
		}
		ex := *cur
		ex.line, ex.text = n, line
		out = append(out, ex)
	}
	if in {
		t.Errorf("%s: a ```jsonc block never ends", page)
	}
	if nblocks == 0 {
		t.Fatalf("%s: no ```jsonc block of examples", page)
	}
	return out
}

// parseDocComment reads an examples comment (without its "// ").
func parseDocComment(c string) (docExample, string) {
	var ex docExample
	if rest, ok := strings.CutPrefix(c, "invalid "); ok {
		ex.invalid = true
		var want string
		c, want, ok = strings.Cut(rest, ": ")
		if !ok || want == "" {
			return ex, `an invalid example's comment ends ": ERROR", the error the harness gives`
		}
		ex.want = want
	}
	if head, ok := strings.CutSuffix(c, ", fenced"); ok {
		c, ex.fenced = head, true
	}
	words := strings.Fields(c)
	switch {
	case len(words) == 2 && words[0] == "request":
		ex.kind, ex.name = "request", words[1]
	case len(words) == 3 && words[0] == "reply" && words[1] == "to":
		ex.kind, ex.name = "reply", words[2]
	case len(words) == 2 && words[0] == "event" && !ex.invalid:
		ex.kind, ex.name = "event", words[1]
	case len(words) == 1 && words[0] == "event" && ex.invalid:
		ex.kind = "event"
	default:
		return ex, `want "request OP", "reply to OP[, fenced]", "event NAME", or "invalid reply to OP: ERROR", "invalid event: ERROR"`
	}
	if ex.kind == "request" && ex.invalid {
		return ex, "the harness writes requests: none is invalid"
	}
	if ex.fenced && ex.kind != "reply" {
		return ex, `", fenced" goes with a reply`
	}
	ops := []string{OpHello, OpPing, OpAcquire, OpRelease, OpRenew, OpReenter, OpClose}
	events := []string{EventLost, EventRenewing, EventRenewed}
	if ex.kind != "event" && !slices.Contains(ops, ex.name) || ex.kind == "event" && ex.name != "" && !slices.Contains(events, ex.name) {
		return ex, "no such " + map[bool]string{true: "event", false: "op"}[ex.kind == "event"] + " " + ex.name
	}
	return ex, ""
}

// checkDocRequest holds a documented request to what the harness writes:
// it decodes into Request with no field left over, and the harness's
// encoding of it is the same JSON (the same fields and values: none the
// harness would leave out, none of another type).
func checkDocRequest(ex docExample) string {
	dec := json.NewDecoder(strings.NewReader(ex.text))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return "not a request the harness writes: " + err.Error()
	}
	if req.Op != ex.name {
		return "op " + req.Op + ", but the comment says " + ex.name
	}
	if req.ID == 0 {
		return "no id"
	}
	if req.TimeoutMillis < 0 || req.TTLMillis < 0 {
		return "timeout_ms and ttl_ms are never negative"
	}
	enc, err := json.Marshal(req)
	if err != nil {
		return err.Error()
	}
	var have, want any
	if err := json.Unmarshal([]byte(ex.text), &want); err != nil {
		return err.Error()
	}
	if err := json.Unmarshal(enc, &have); err != nil {
		return err.Error()
	}
	if !reflect.DeepEqual(have, want) {
		return "the harness writes this request as " + string(enc)
	}
	return ""
}

// checkDocLine runs a reply or event line through what the harness does
// with it: parseLine, then for a reply to hello checkHello, for an ok
// acquire or reenter checkGrant. It returns the first error, "" for none.
func checkDocLine(ex docExample) string {
	r, bad := parseLine([]byte(ex.text))
	if bad != "" {
		return bad
	}
	if ex.kind == "event" {
		if r.Event == "" {
			return "not an event"
		}
		if ex.name != "" && r.Event != ex.name {
			return "event " + r.Event + ", but the comment says " + ex.name
		}
		return ""
	}
	if r.Event != "" {
		return "an event, but the comment says a reply"
	}
	switch {
	case ex.name == OpHello:
		if err := checkHello(r); err != nil {
			return err.Error()
		}
	case (ex.name == OpAcquire || ex.name == OpReenter) && r.Result == ResultOK:
		return checkGrant(r, ex.fenced)
	}
	return ""
}

// TestDocExamples holds every example line of docs/LINEPROTO.md to the
// harness: a documented request is what the harness writes, a documented
// reply or event passes its parser and checks, and a documented invalid
// line is refused with the documented error. The page must show every op,
// every event, and the refusals issue 63.7 names (lock as an object,
// valid_ms a float or negative).
func TestDocExamples(t *testing.T) {
	page := filepath.Join("..", "docs", "LINEPROTO.md")
	exs := docExamples(t, page)
	seen := map[string]bool{}
	for _, ex := range exs {
		var got string
		if ex.kind == "request" {
			got = checkDocRequest(ex)
		} else {
			got = checkDocLine(ex)
		}
		switch {
		case !ex.invalid && got != "":
			t.Errorf("%s:%d: %s %s: %s\n\t%s", page, ex.line, ex.kind, ex.name, got, ex.text)
		case ex.invalid && got == "":
			t.Errorf("%s:%d: documented invalid (%s), but the harness takes it\n\t%s", page, ex.line, ex.want, ex.text)
		case ex.invalid && !strings.Contains(got, ex.want):
			t.Errorf("%s:%d: documented refused with %q; the harness says %q\n\t%s", page, ex.line, ex.want, got, ex.text)
		}
		key := ex.kind + " " + ex.name
		if ex.invalid {
			key = "invalid " + ex.kind + " " + ex.want
		}
		seen[key] = true
	}
	var want []string
	for _, op := range []string{OpHello, OpPing, OpAcquire, OpRelease, OpRenew, OpReenter, OpClose} {
		want = append(want, "request "+op, "reply "+op)
	}
	for _, ev := range []string{EventLost, EventRenewing, EventRenewed} {
		want = append(want, "event "+ev)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("%s: no example of a %s", page, w)
		}
	}
	for _, w := range []string{`field "lock" must be a string`, `field "valid_ms" must be an integer ≥ 0 (milliseconds), not 996.5`, `field "valid_ms" must be an integer ≥ 0 (milliseconds), not -4`} {
		found := false
		for k := range seen {
			found = found || strings.HasPrefix(k, "invalid reply ") && strings.Contains(k, w)
		}
		if !found {
			t.Errorf("%s: no invalid example refused with %s", page, w)
		}
	}
	t.Logf("%d example lines of %s checked", len(exs), page)
}

// TestFieldErrorsNameTheRule (issue 63.7): a reply field of the wrong type
// or out of range is refused naming the field and its rule, not as "not a
// JSON object" (the line was one).
func TestFieldErrorsNameTheRule(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"id":1,"result":"ok","version":1,"lock":{"name":"x"},"ops":["acquire"]}`, `field "lock" must be a string, not an object`},
		{`{"id":1,"result":"ok","lock":["x"]}`, `field "lock" must be a string, not an array`},
		{`{"id":7,"result":"ok","lease":1,"valid_ms":1.5}`, `field "valid_ms" must be an integer ≥ 0 (milliseconds), not 1.5`},
		{`{"id":7,"result":"ok","lease":1,"valid_ms":1e3}`, `field "valid_ms" must be an integer ≥ 0 (milliseconds), not 1e3`},
		{`{"id":7,"result":"ok","lease":1,"valid_ms":-1}`, `field "valid_ms" must be an integer ≥ 0 (milliseconds), not -1`},
		{`{"id":7,"result":"ok","lease":-1}`, `field "lease" must be a positive integer, not -1`},
		{`{"id":7,"result":"ok","took_us":"5"}`, `field "took_us" must be an integer ≥ 0 (microseconds), not a string`},
		{`{"id":7,"result":"ok","fence":true}`, `field "fence" must be an integer ≥ 0, not a boolean`},
		{`{"id":1,"result":"ok","ops":"acquire"}`, `field "ops" must be an array of strings, not a string`},
		{`"ok"`, `not a JSON object but a string`},
		{`{"id":1,`, `not JSON`},
	} {
		_, bad := parseLine([]byte(tc.line))
		if !strings.HasPrefix(bad, tc.want) {
			t.Errorf("%s: %q; want %q", tc.line, bad, tc.want)
		}
	}
	if _, bad := parseLine([]byte(`{"id":7,"result":"ok","lease":1,"valid_ms":0,"took_us":0}`)); bad != "" {
		t.Errorf("valid_ms 0 and took_us 0 refused: %s", bad)
	}
}
