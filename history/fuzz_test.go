package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
)

// FuzzRead: the reader never panics, every error is a *ParseError with a
// line number, every accepted line is valid JSON that encoding/json decodes
// to the same fields, and every accepted history re-encodes and re-reads to
// the same ops. Seeds: testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	f.Add([]byte(okAcquire + "\n" + okWrite + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, err := ReadAll(bytes.NewReader(data), "fuzz")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrBadInput) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if pe.File != "fuzz" || pe.Line < 1 || pe.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error %+v has no valid line number", pe)
			}
			return
		}
		lines := bytes.Split(data, []byte("\n"))
		for _, op := range ops {
			line := lines[op.Line-1]
			if !json.Valid(line) {
				t.Fatalf("accepted invalid JSON on line %d: %q", op.Line, line)
			}
			checkAgainstEncodingJSON(t, line, op)
		}

		var buf bytes.Buffer
		w := NewWriter(&buf)
		for _, op := range ops {
			if err := w.WriteOp(op); err != nil {
				t.Fatalf("accepted op does not re-encode: %v", err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		again, err := ReadAll(&buf, "again")
		if err != nil {
			t.Fatalf("re-encoded history does not read: %v\n%s", err, buf.Bytes())
		}
		if len(again) != len(ops) {
			t.Fatalf("re-read %d ops, want %d", len(again), len(ops))
		}
		for i := range ops {
			a, b := ops[i], again[i]
			a.Line, b.Line = 0, 0
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("op %d changed in the round trip:\n got %+v\nwant %+v", i, b, a)
			}
		}
	})
}

// checkAgainstEncodingJSON decodes line with encoding/json and checks that
// each contract field matches op.
func checkAgainstEncodingJSON(t *testing.T, line []byte, op Op) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("encoding/json rejects accepted line %q: %v", line, err)
	}
	str := func(field, got string, present bool) {
		v, ok := m[field]
		if ok && v == nil {
			ok = false
		}
		if ok != present {
			t.Fatalf("%s: present %v, encoding/json says %v, line %q", field, present, ok, line)
		}
		if ok && v != got {
			t.Fatalf("%s: %q, encoding/json says %q, line %q", field, got, v, line)
		}
	}
	num := func(field, got string, present bool) {
		v, ok := m[field]
		if ok && v == nil {
			ok = false
		}
		if ok != present {
			t.Fatalf("%s: present %v, encoding/json says %v, line %q", field, present, ok, line)
		}
		if ok && string(v.(json.Number)) != got {
			t.Fatalf("%s: %s, encoding/json says %s, line %q", field, got, v, line)
		}
	}
	str("client", op.Client, op.Client != "" || m["client"] == "")
	str("op", string(op.Kind), true)
	str("key", op.Key, op.Key != "" || m["key"] == "")
	str("name", op.Name, op.Name != "" || m["name"] == "")
	str("result", string(op.Result), op.Result != "" || m["result"] == "")
	str("value", op.Value, op.HasValue)
	str("prev", op.Prev, op.HasPrev)
	num("call", strconv.FormatInt(op.Call, 10), true)
	num("return", strconv.FormatInt(op.Return, 10), op.Completed)
	num("token", strconv.FormatUint(op.Token, 10), op.HasToken)
	if v, ok := m["ttl_ms"]; ok && v != nil {
		num("ttl_ms", strconv.FormatInt(op.TTLMillis, 10), true)
	} else if op.TTLMillis != 0 {
		t.Fatalf("ttl_ms %d without the field, line %q", op.TTLMillis, line)
	}
}
