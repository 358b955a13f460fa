package history

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The shared examples of the contract (copied from shared/examples) must all
// read, with the fields the contract gives them.
func TestReadExamples(t *testing.T) {
	files, err := filepath.Glob("testdata/examples/*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d example histories, want at least 5", len(files))
	}
	want := map[string]int{
		"ok-fenced-handoff.jsonl":                     8,
		"ok-paused-holder-write-rejected.jsonl":       8,
		"ok-unknown-acquire.jsonl":                    3,
		"violated-paused-holder-write-accepted.jsonl": 7,
		"violated-two-holders.jsonl":                  2,
	}
	for _, f := range files {
		ops, err := ReadFile(f)
		if err != nil {
			t.Errorf("ReadFile(%s): %v", f, err)
			continue
		}
		if n, ok := want[filepath.Base(f)]; ok && len(ops) != n {
			t.Errorf("%s: %d ops, want %d", f, len(ops), n)
		}
		for i, op := range ops {
			if op.Line != i+1 {
				t.Errorf("%s: op %d has Line %d, want %d", f, i, op.Line, i+1)
			}
		}
	}

	ops, err := ReadFile("testdata/examples/ok-unknown-acquire.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := Op{Client: "a", Kind: Acquire, Key: "cart", Call: 0, Result: Unknown, TTLMillis: 200, Line: 1}
	if ops[0] != wantFirst {
		t.Errorf("never-completed acquire = %+v, want %+v", ops[0], wantFirst)
	}
	wantSecond := Op{Client: "b", Kind: Acquire, Key: "cart", Call: 50000000, Return: 52000000, Completed: true,
		Result: OK, TTLMillis: 2000, Token: 9, HasToken: true, Line: 2}
	if ops[1] != wantSecond {
		t.Errorf("ok acquire = %+v, want %+v", ops[1], wantSecond)
	}

	ops, err = ReadFile("testdata/examples/ok-fenced-handoff.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if r := ops[1]; r.Kind != Read || !r.HasValue || r.Value != "" || !r.HasToken || r.Token != 11 {
		t.Errorf("read of a never-written resource = %+v, want value \"\" present and token 11", r)
	}
	if w := ops[6]; w.Kind != Write || w.Value != "y" || !w.HasPrev || w.Prev != "x" {
		t.Errorf("write = %+v, want value y prev x", w)
	}
	ops, err = ReadFile("testdata/examples/ok-paused-holder-write-rejected.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if f := ops[0]; f.Kind != Fault || f.Name != "pause-client a" || !f.Completed || f.Return != 700000000 || f.Client != "" {
		t.Errorf("fault = %+v", f)
	}
}

const (
	okAcquire = `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","ttl_ms":100,"token":7}`
	okWrite   = `{"client":"a","op":"write","key":"k","call":3,"return":4,"result":"ok","token":7,"value":"v","prev":""}`
)

// Every validation rule rejects its line with the field it names.
func TestReadRejects(t *testing.T) {
	cases := []struct {
		name  string
		input string
		line  int
		field string
		msg   string
	}{
		{"malformed json", `{"client":"a",`, 1, "", "malformed JSON"},
		{"not an object", `[1,2]`, 1, "", "malformed JSON"},
		{"trailing garbage", okAcquire + ` x`, 1, "", "after the object"},
		{"two objects on a line", okAcquire + okAcquire, 1, "", "after the object"},
		{"unterminated string", `{"client":"a`, 1, "", "unterminated string"},
		{"raw control char", "{\"client\":\"a\x01\"}", 1, "", "control character"},
		{"bad escape", `{"client":"a\q"}`, 1, "", "bad escape"},
		{"bad extra value", `{"extra":tru,"op":"fault","name":"n","call":1}`, 1, "", "malformed JSON"},
		{"deep extra", `{"x":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, 1, "", "nesting"},
		{"error on later line", okAcquire + "\n\n" + `{"op":"bogus"}`, 3, "op", `unknown operation "bogus"`},
		{"missing op", `{"client":"a","key":"k","call":1,"return":2,"result":"ok"}`, 1, "op", "missing"},
		{"unknown mode", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","mode":"shared"}`, 1, "mode", `unknown mode "shared"`},
		{"mode on a write", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","value":"v","mode":"read"}`, 1, "mode", "only acquire"},
		{"permits on a read hold", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","mode":"read","permits":2}`, 1, "permits", "only a permits hold"},
		{"zero permits", `{"client":"a","op":"release","key":"k","call":1,"return":2,"result":"ok","mode":"permits","permits":-1}`, 1, "permits", "want at least 1"},
		{"permits without capacity", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","mode":"permits","permits":2}`, 1, "capacity", "missing"},
		{"capacity below permits", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","mode":"permits","permits":3,"capacity":2}`, 1, "capacity", "below the 3 permits"},
		{"capacity on a release", `{"client":"a","op":"release","key":"k","call":1,"return":2,"result":"ok","mode":"permits","capacity":2}`, 1, "capacity", "only an acquire of permits"},
		{"unknown op", `{"client":"a","op":"lock","key":"k","call":1,"return":2,"result":"ok"}`, 1, "op", `unknown operation "lock"`},
		{"op not a string", `{"client":"a","op":3,"key":"k","call":1,"return":2,"result":"ok"}`, 1, "op", "want a string"},
		{"missing client", `{"op":"acquire","key":"k","call":1,"return":2,"result":"ok"}`, 1, "client", "missing"},
		{"empty client", `{"client":"","op":"acquire","key":"k","call":1,"return":2,"result":"ok"}`, 1, "client", "missing"},
		{"null client", `{"client":null,"op":"acquire","key":"k","call":1,"return":2,"result":"ok"}`, 1, "client", "missing"},
		{"null call", `{"client":"a","op":"acquire","key":"k","call":null,"return":2,"result":"ok"}`, 1, "call", "missing"},
		{"null value on a write", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","value":null}`, 1, "value", "missing"},
		{"invalid UTF-8 in client", "{\"client\":\"a\xff\",\"op\":\"acquire\",\"key\":\"k\",\"call\":1,\"return\":2,\"result\":\"ok\"}", 1, "client", "invalid UTF-8 byte 0xff"},
		{"truncated UTF-8 in key", "{\"client\":\"a\",\"op\":\"acquire\",\"key\":\"\xc3\",\"call\":1}", 1, "key", "invalid UTF-8"},
		{"lone surrogate in value", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","value":"\ud800x"}`, 1, "value", "lone UTF-16 surrogate"},
		{"reversed surrogates in client", `{"client":"\ude00\ud83d","op":"acquire","key":"k","call":1}`, 1, "client", "lone UTF-16 surrogate"},
		{"invalid UTF-8 in an extra field", "{\"note\":\"\xfe\",\"op\":\"fault\",\"name\":\"n\",\"call\":1}", 1, "note", "invalid UTF-8"},
		{"invalid UTF-8 in a field name", "{\"n\xffote\":1,\"op\":\"fault\",\"name\":\"n\",\"call\":1}", 1, "", "field name: invalid UTF-8"},
		{"missing key", `{"client":"a","op":"acquire","call":1,"return":2,"result":"ok"}`, 1, "key", "missing"},
		{"missing result", `{"client":"a","op":"acquire","key":"k","call":1,"return":2}`, 1, "result", "missing"},
		{"missing call", `{"client":"a","op":"acquire","key":"k","return":2,"result":"ok"}`, 1, "call", "missing"},
		{"fault missing name", `{"op":"fault","call":1,"return":2}`, 1, "name", "missing"},
		{"fault missing call", `{"op":"fault","name":"n","return":2}`, 1, "call", "missing"},
		{"name on non-fault", `{"client":"a","op":"acquire","name":"n","key":"k","call":1,"return":2,"result":"ok"}`, 1, "name", "only fault"},
		{"evidence on non-fault", `{"client":"a","op":"acquire","evidence":"e","key":"k","call":1,"return":2,"result":"ok"}`, 1, "evidence", "only fault"},
		{"evidence not a string", `{"op":"fault","name":"n","evidence":3,"call":1}`, 1, "evidence", "want a string"},
		{"rejected acquire", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"rejected"}`, 1, "result", `"rejected" is not a result of acquire`},
		{"fail write", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"fail","value":"v"}`, 1, "result", `"fail" is not a result of write`},
		{"fail read", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"fail","value":"v"}`, 1, "result", `"fail" is not a result of read`},
		{"bogus release result", `{"client":"a","op":"release","key":"k","call":1,"return":2,"result":"yes"}`, 1, "result", `"yes" is not a result of release`},
		{"bogus fault result", `{"op":"fault","name":"n","call":1,"return":2,"result":"yes"}`, 1, "result", `unknown result "yes"`},
		{"return before call", `{"client":"a","op":"renew","key":"k","call":5,"return":4,"result":"ok"}`, 1, "return", "4 is before call 5"},
		{"negative call", `{"client":"a","op":"renew","key":"k","call":-5,"return":4,"result":"ok"}`, 1, "call", "negative time -5"},
		{"negative return", `{"op":"fault","name":"n","call":0,"return":-1}`, 1, "return", "negative time -1"},
		{"float call", `{"client":"a","op":"renew","key":"k","call":1.5,"return":4,"result":"ok"}`, 1, "call", "want an integer, got 1.5"},
		{"exponent call", `{"client":"a","op":"renew","key":"k","call":1e3,"return":4,"result":"ok"}`, 1, "call", "want an integer, got 1e3"},
		{"string call", `{"client":"a","op":"renew","key":"k","call":"1","return":4,"result":"ok"}`, 1, "call", "want an integer, got a string"},
		{"bool return", `{"client":"a","op":"renew","key":"k","call":1,"return":true,"result":"ok"}`, 1, "return", "want an integer"},
		{"huge call", `{"client":"a","op":"renew","key":"k","call":99999999999999999999,"return":4,"result":"ok"}`, 1, "call", "out of range"},
		{"call at MaxTime", `{"client":"a","op":"renew","key":"k","call":2305843009213693952,"result":"unknown"}`, 1, "call", "is not below 2305843009213693952"},
		{"return at MaxTime", `{"client":"a","op":"renew","key":"k","call":1,"return":2305843009213693952,"result":"ok"}`, 1, "return", "is not below"},
		{"call at 2^62-1", `{"client":"a","op":"renew","key":"k","call":4611686018427387903,"return":4611686018427387904,"result":"ok"}`, 1, "call", "is not below"},
		{"ttl above MaxTTLMillis", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","ttl_ms":1099511627777}`, 1, "ttl_ms", "is above 1099511627776"},
		{"ok acquire without return", `{"client":"a","op":"acquire","key":"k","call":1,"result":"ok","token":3}`, 1, "return", "never completed must be unknown"},
		{"fail release without return", `{"client":"a","op":"release","key":"k","call":1,"return":null,"result":"fail"}`, 1, "return", "never completed must be unknown"},
		{"token on fault", `{"op":"fault","name":"n","call":1,"return":2,"token":3}`, 1, "token", "fault ops carry no token"},
		{"negative token", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","token":-3}`, 1, "token", "negative token -3"},
		{"float token", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","token":3.0}`, 1, "token", "want an integer"},
		{"ttl on release", `{"client":"a","op":"release","key":"k","call":1,"return":2,"result":"ok","ttl_ms":100}`, 1, "ttl_ms", "only acquire and renew"},
		{"zero ttl on write", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","ttl_ms":0,"value":"v"}`, 1, "ttl_ms", "only acquire and renew"},
		{"negative ttl", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","ttl_ms":-100}`, 1, "ttl_ms", "negative lease length -100"},
		{"value on acquire", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","value":"v"}`, 1, "value", "only write and read"},
		{"value on fault", `{"op":"fault","name":"n","call":1,"value":"v"}`, 1, "value", "only write and read"},
		{"write without value", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok"}`, 1, "value", "a write says what it wrote"},
		{"ok read without value", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"ok"}`, 1, "value", "an ok read says what it saw"},
		{"value not a string", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"ok","value":5}`, 1, "value", "want a string"},
		{"wait on release", `{"client":"a","op":"release","key":"k","call":1,"return":2,"result":"ok","wait":true}`, 1, "wait", "only acquire carries wait"},
		{"wait not a boolean", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"fail","wait":1}`, 1, "wait", "want true or false"},
		{"wait as a string", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"fail","wait":"true"}`, 1, "wait", "want true or false"},
		{"prev on read", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"ok","value":"","prev":""}`, 1, "prev", "only write carries prev"},
		{"prev on acquire", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","prev":"x"}`, 1, "prev", "only write carries prev"},
		{"claim on read", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"ok","value":"","valid_until":9}`, 1, "valid_until", "only acquire, renew, release, write and ttl"},
		{"negative claim", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","valid_until":-1}`, 1, "valid_until", "negative time -1"},
		{"claim past MaxTime", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","valid_until":2305843009213693952}`, 1, "valid_until", "not below"},
		{"lease zero", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","lease":0}`, 1, "lease", "0 is not a lease number"},
		{"negative lease", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","lease":-3}`, 1, "lease", "negative lease -3"},
		{"lease on fault", `{"op":"fault","name":"n","call":1,"lease":2}`, 1, "lease", "fault ops carry no lease"},
		{"checked on read", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"ok","value":"","checked":true}`, 1, "checked", "only write carries checked"},
		{"checked not a boolean", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","value":"","checked":"yes"}`, 1, "checked", "want true or false"},
		{"in_line on a one-shot acquire", `{"client":"a","op":"acquire","key":"k","call":1,"return":9,"result":"ok","in_line":3}`, 1, "in_line", "only a blocking acquire"},
		{"in_line before the call", `{"client":"a","op":"acquire","key":"k","call":4,"return":9,"result":"ok","wait":true,"in_line":3}`, 1, "in_line", "before call"},
		{"in_line after the return", `{"client":"a","op":"acquire","key":"k","call":1,"return":9,"result":"fail","wait":true,"in_line":10}`, 1, "in_line", "after return"},
		{"deadline on a fault", `{"op":"fault","name":"partition","call":1,"return":9,"deadline":5}`, 1, "deadline", "carry no deadline"},
		{"deadline on a loss notice", `{"client":"a","op":"lost","key":"k","call":1,"return":1,"result":"ok","deadline":5}`, 1, "deadline", "carry no deadline"},
		{"negative deadline", `{"client":"a","op":"release","key":"k","call":1,"return":9,"result":"ok","deadline":-1}`, 1, "deadline", "negative"},
		{"deadline past the range", `{"client":"a","op":"release","key":"k","call":1,"return":9,"result":"ok","deadline":2305843009213693952}`, 1, "deadline", "not below"},
		{"close with a token", `{"client":"a","op":"close","key":"k","call":1,"return":9,"result":"ok","token":3}`, 1, "token", "carries no token"},
		{"close rejected", `{"client":"a","op":"close","key":"k","call":1,"return":9,"result":"rejected"}`, 1, "result", "not a result of close"},
		{"lost not ok", `{"client":"a","op":"lost","key":"k","call":1,"return":1,"result":"unknown"}`, 1, "result", "a loss notice is ok"},
		{"lost with a duration", `{"client":"a","op":"lost","key":"k","call":1,"return":5,"result":"ok"}`, 1, "return", "a loss notice is an instant"},
		{"lost without return", `{"client":"a","op":"lost","key":"k","call":1,"result":"ok"}`, 1, "return", "must be unknown"},
		{"duplicate field", `{"client":"a","client":"b","op":"acquire","key":"k","call":1,"return":2,"result":"ok"}`, 1, "client", "duplicate field"},
		{"claim on a ttl that failed", `{"client":"a","op":"ttl","key":"k","call":1,"return":2,"result":"fail","lease":1,"valid_until":9}`, 1, "valid_until", "only when the lock answered"},
		{"ttl_ms on a ttl", `{"client":"a","op":"ttl","key":"k","call":1,"return":2,"result":"ok","ttl_ms":100}`, 1, "ttl_ms", "only acquire and renew"},
		{"ttl rejected", `{"client":"a","op":"ttl","key":"k","call":1,"return":2,"result":"rejected"}`, 1, "result", "not a result of ttl"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, err := ReadAll(strings.NewReader(c.input), "h.jsonl")
			if err == nil {
				t.Fatalf("accepted %q as %+v", c.input, ops)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if !errors.Is(err, ErrBadInput) {
				t.Errorf("errors.Is(%v, ErrBadInput) is false", err)
			}
			if pe.File != "h.jsonl" || pe.Line != c.line || pe.Field != c.field || !strings.Contains(pe.Msg, c.msg) {
				t.Errorf("got %+v, want file h.jsonl line %d field %q msg containing %q", pe, c.line, c.field, c.msg)
			}
			prefix := "h.jsonl:" + itoa(c.line) + ": "
			if c.field != "" {
				prefix += c.field + ": "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Lines the contract allows that a strict reader could wrongly refuse.
func TestReadAccepts(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  Op
	}{
		{"completed unknown (a timeout)", `{"client":"a","op":"acquire","key":"k","call":1,"return":9,"result":"unknown","ttl_ms":5}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 9, Completed: true, Result: Unknown, TTLMillis: 5}},
		{"null return", `{"client":"a","op":"release","key":"k","call":1,"return":null,"result":"unknown","token":2}`,
			Op{Client: "a", Kind: Release, Key: "k", Call: 1, Result: Unknown, Token: 2, HasToken: true}},
		{"extra fields ignored", `{"client":"a","op":"renew","key":"k","call":1,"return":1,"result":"fail","extra":{"a":[1,2.5e3,null,true,"x"]},"Client":"B"}`,
			Op{Client: "a", Kind: Renew, Key: "k", Call: 1, Return: 1, Completed: true, Result: Fail}},
		{"fault with client and key", `{"op":"fault","name":"partition","client":"a","key":"k","call":3}`,
			Op{Client: "a", Kind: Fault, Key: "k", Name: "partition", Call: 3}},
		{"rejected read without value", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"rejected","token":1}`,
			Op{Client: "a", Kind: Read, Key: "k", Call: 1, Return: 2, Completed: true, Result: Rejected, Token: 1, HasToken: true}},
		{"escapes and unicode", `{"client":"\u00e9\ud83d\ude00\n\"","op":"write","key":"k/\/","call":0,"return":0,"result":"ok","value":"\ufffdx","prev":"é"}`,
			Op{Client: "é😀\n\"", Kind: Write, Key: "k//", Result: OK, Completed: true, Value: "\uFFFDx", HasValue: true, Prev: "é", HasPrev: true}},
		{"an acquire of permits", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","mode":"permits","permits":2,"capacity":3}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, Mode: ModePermits, Permits: 2, Capacity: 3}},
		{"null optional fields are absent", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","token":null,"ttl_ms":null}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK}},
		{"null value on a rejected read", `{"client":"a","op":"read","key":"k","call":1,"return":2,"result":"rejected","value":null}`,
			Op{Client: "a", Kind: Read, Key: "k", Call: 1, Return: 2, Completed: true, Result: Rejected}},
		{"whitespace and CRLF", "  {\"op\" : \"fault\" , \"name\":\"n\",\t\"call\": 0 }  \r\n",
			Op{Kind: Fault, Name: "n"}},
		{"blocking acquire", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"fail","ttl_ms":5,"wait":true}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: Fail, TTLMillis: 5, Wait: true}},
		{"wait false is one attempt", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"fail","wait":false}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: Fail}},
		{"claims, loss notice and checked write", `{"client":"a","op":"write","key":"k","call":1,"return":2,"result":"ok","value":"v","valid_until":7,"lease":3,"checked":true}`,
			Op{Client: "a", Kind: Write, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, Value: "v", HasValue: true, ValidUntil: 7, HasValid: true, Hold: 3, Checked: true}},
		{"loss notice", `{"client":"a","op":"lost","key":"k","call":4,"return":4,"result":"ok","token":2,"lease":1}`,
			Op{Client: "a", Kind: Lost, Key: "k", Call: 4, Return: 4, Completed: true, Result: OK, Token: 2, HasToken: true, Hold: 1}},
		{"ttl answer", `{"client":"a","op":"ttl","key":"k","call":4,"return":5,"result":"ok","token":2,"lease":3,"valid_until":504,"deadline":1004}`,
			Op{Client: "a", Kind: TTL, Key: "k", Call: 4, Return: 5, Completed: true, Result: OK, Token: 2, HasToken: true, Hold: 3, ValidUntil: 504, HasValid: true, Deadline: 1004, HasDeadline: true}},
		{"ttl: not held", `{"client":"a","op":"ttl","key":"k","call":4,"return":5,"result":"fail","lease":3}`,
			Op{Client: "a", Kind: TTL, Key: "k", Call: 4, Return: 5, Completed: true, Result: Fail, Hold: 3}},
		{"max token", `{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"ok","token":18446744073709551615}`,
			Op{Client: "a", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, Token: 1<<64 - 1, HasToken: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, err := ReadAll(strings.NewReader(c.input), "h")
			if err != nil {
				t.Fatal(err)
			}
			c.want.Line = 1
			if len(ops) != 1 || ops[0] != c.want {
				t.Fatalf("got %+v, want %+v", ops, c.want)
			}
		})
	}
}

func TestReadBlankAndLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20) // far beyond any Scanner's default limit
	input := "\n  \n" + okAcquire + "\n\n" +
		`{"client":"a","op":"write","key":"k","call":3,"return":4,"result":"ok","value":"` + long + `"}` + "\n" +
		okWrite // no trailing newline
	ops, err := ReadAll(strings.NewReader(input), "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 {
		t.Fatalf("got %d ops, want 3", len(ops))
	}
	if ops[0].Line != 3 || ops[1].Line != 5 || ops[2].Line != 6 {
		t.Errorf("lines %d %d %d, want 3 5 6 (blank lines counted)", ops[0].Line, ops[1].Line, ops[2].Line)
	}
	if ops[1].Value != long {
		t.Errorf("long value: got %d bytes, want %d", len(ops[1].Value), len(long))
	}
	// A broken line after a long one still gets its number.
	_, err = ReadAll(strings.NewReader(input+"\n{"), "h")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 7 {
		t.Errorf("got %v, want a ParseError on line 7", err)
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.jsonl"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.jsonl") {
		t.Errorf("got %v, want a not-exist error naming the file", err)
	}
	if errors.Is(err, ErrBadInput) {
		t.Errorf("an I/O error is not bad input: %v", err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestReadIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadAll(failingReader{boom}, "h")
	if !errors.Is(err, boom) || errors.Is(err, ErrBadInput) {
		t.Errorf("got %v, want the reader's error, not bad input", err)
	}
}

func sampleOps() []Op {
	return []Op{
		{Kind: Fault, Name: "pause-client a", Call: 10, Return: 700, Completed: true, Evidence: "a: 3 calls held for 690ns"},
		{Kind: Fault, Name: "partition \"x\"\t\u2028", Call: 11},
		{Client: "a", Kind: Acquire, Key: "cart", Call: 0, Return: 2, Completed: true, Result: OK, TTLMillis: 200, Token: 3, HasToken: true},
		{Client: "a", Kind: Read, Key: "cart", Call: 3, Return: 4, Completed: true, Result: OK, Token: 3, HasToken: true, HasValue: true},
		{Client: "b", Kind: Write, Key: "cart", Call: 5, Return: 6, Completed: true, Result: Rejected, Token: 2, HasToken: true, Value: "b1\x00\n", HasValue: true, HasPrev: true},
		{Client: "b", Kind: Write, Key: "cart", Call: 7, Result: Unknown, Value: "unfenced", HasValue: true, Prev: "b1", HasPrev: true},
		{Client: "c", Kind: Renew, Key: "cart", Call: 8, Return: 9, Completed: true, Result: Unknown, TTLMillis: 50, Token: 1<<64 - 1, HasToken: true},
		{Client: "c", Kind: Release, Key: "cart", Call: 9, Return: 9, Completed: true, Result: Fail},
		{Client: "d", Kind: Acquire, Key: "cart", Call: 1, Return: 12, Completed: true, Result: Fail, TTLMillis: 200, Wait: true},
		{Client: "e", Kind: Acquire, Key: "cart", Call: 13, Return: 14, Completed: true, Result: OK, TTLMillis: 200, ValidUntil: 200_000_013, HasValid: true, Hold: 1},
		{Client: "e", Kind: Write, Key: "cart", Call: 15, Return: 16, Completed: true, Result: OK, Value: "e", HasValue: true, ValidUntil: 0, HasValid: true, Hold: 1, Checked: true},
		{Client: "e", Kind: Lost, Key: "cart", Call: 17, Return: 17, Completed: true, Result: OK, Hold: 1<<64 - 1},
		{Client: "f", Kind: Acquire, Key: "cart", Call: 18, Return: 30, Completed: true, Result: OK, TTLMillis: 200, Wait: true, InLine: 19, HasInLine: true, Hold: 1, Deadline: 1018, HasDeadline: true},
		{Client: "f", Kind: Close, Key: "cart", Call: 31, Return: 40, Completed: true, Result: OK, Deadline: 0, HasDeadline: true},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	want := sampleOps()
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i].Line = i + 1
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// encoding/json agrees with the hand-written encoder on every line.
	data, _ := os.ReadFile(path)
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d %s: encoding/json: %v", i+1, line, err)
		}
		if m["op"] != string(want[i].Kind) {
			t.Errorf("line %d: op %v", i+1, m["op"])
		}
		if want[i].HasValue && m["value"] != want[i].Value {
			t.Errorf("line %d: value %q, want %q", i+1, m["value"], want[i].Value)
		}
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	err := w.WriteOp(Op{Client: "a", Kind: Acquire, Key: "k", Result: OK}) // ok without return
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "return" {
		t.Fatalf("got %v, want a ParseError on return", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("invalid op was written: %q", buf.String())
	}
}

// Op works inside other JSON documents with the contract's field names.
func TestOpJSONMethods(t *testing.T) {
	type doc struct {
		Ops []Op `json:"ops"`
	}
	in := doc{Ops: sampleOps()}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"ttl_ms":200`)) {
		t.Errorf("marshalled doc lacks contract field names: %s", b)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("got %+v, want %+v", out, in)
	}
	err = json.Unmarshal([]byte(`{"ops":[{"op":"fault","call":1}]}`), &out)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "name: missing") {
		t.Errorf("got %v, want a bad input error naming name", err)
	}
}

// TestReadLineLimit: a line longer than MaxLineBytes is refused with its
// line number instead of being read into memory whole.
func TestReadLineLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB")
	}
	okLine := `{"op":"fault","name":"n","call":1}` + "\n"
	long := io.MultiReader(strings.NewReader(okLine+`{"op":"fault","name":"`),
		io.LimitReader(repeatReader('x'), MaxLineBytes), strings.NewReader(`","call":1}`+"\n"))
	_, err := ReadAll(long, "h")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Msg, "longer than") {
		t.Fatalf("ReadAll of a %d-byte line: %v, want a ParseError on line 2", MaxLineBytes, err)
	}
	// Just under the limit is read.
	under := io.MultiReader(strings.NewReader(`{"op":"fault","name":"`),
		io.LimitReader(repeatReader('x'), MaxLineBytes-64), strings.NewReader(`","call":1}`+"\n"))
	ops, err := ReadAll(under, "h")
	if err != nil || len(ops) != 1 || len(ops[0].Name) != MaxLineBytes-64 {
		t.Fatalf("ReadAll of a line under the limit: %d ops, %v", len(ops), err)
	}
}

// repeatReader yields b forever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A compressed history reads as its content (a trimmed run keeps most
// histories as history.jsonl.gz), and a corrupt one names the file.
func TestReadFileGzip(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "h.jsonl")
	want := sampleOps()
	if err := WriteFile(plain, want); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(data)
	zw.Close()
	gz := filepath.Join(dir, "h.jsonl.gz")
	if err := os.WriteFile(gz, zb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(gz)
	if err != nil {
		t.Fatalf("read %s: %v", gz, err)
	}
	if !reflect.DeepEqual(a, b) || len(b) != len(want) {
		t.Errorf("gzip history reads %d ops, plain %d: they differ", len(b), len(a))
	}
	bad := filepath.Join(dir, "bad.jsonl.gz")
	if err := os.WriteFile(bad, zb.Bytes()[:len(zb.Bytes())/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl.gz") {
		t.Errorf("truncated gzip: got %v, want an error naming the file", err)
	}
}

// TestReadAllContextStops: a read whose context ends stops, with an error
// that wraps ErrStopped and the context's cause (a budget's: check and
// trace tell a stop from bad input by it), and returns no ops. Before,
// reading ignored every budget: a history of a million keys was read
// whole under --max-heap 256MiB.
func TestReadAllContextStops(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, `{"client":"c","op":"acquire","key":"k%d","call":%d,"return":%d,"result":"fail"}`+"\n", i, 10*i, 10*i+1)
	}
	cause := errors.New("budget spent")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	ops, err := ReadAllContext(ctx, strings.NewReader(b.String()), "h.jsonl")
	if !errors.Is(err, ErrStopped) || !errors.Is(err, cause) || errors.Is(err, ErrBadInput) || ops != nil {
		t.Fatalf("ReadAllContext: %d ops, %v; want none, ErrStopped wrapping the cause", len(ops), err)
	}
	ops, err = ReadAllContext(context.Background(), strings.NewReader(b.String()), "h.jsonl")
	if err != nil || len(ops) != 5000 {
		t.Fatalf("ReadAllContext, no end: %d ops, %v; want 5000", len(ops), err)
	}
}
