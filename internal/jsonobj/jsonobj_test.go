package jsonobj

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestObjectKeepsOrder(t *testing.T) {
	got, err := Object([]Member{{"b", 1}, {"a", "x"}, {"c", map[string]int{"z": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b":1,"a":"x","c":{"z":1}}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestSpliceAfter(t *testing.T) {
	for _, c := range []struct{ obj, key, members, want string }{
		{`{"a":1,"b":{"x":[1,2]},"c":3}`, "b", `{"p":"ok","q":"n/a"}`, `{"a":1,"b":{"x":[1,2]},"p":"ok","q":"n/a","c":3}`},
		{`{"a":1,"b":2}`, "b", `{"p":1}`, `{"a":1,"b":2,"p":1}`},
		{`{"a":1}`, "missing", `{"p":1}`, `{"a":1,"p":1}`},
		{`{}`, "a", `{"p":1}`, `{"p":1}`},
		{`{"a":1}`, "a", `{}`, `{"a":1}`},
		{`{"a":"}","b":2}`, "a", `{"p":1}`, `{"a":"}","p":1,"b":2}`},
	} {
		got, err := spliceAfter([]byte(c.obj), c.key, []byte(c.members))
		if err != nil {
			t.Fatalf("%s after %q: %v", c.obj, c.key, err)
		}
		if string(got) != c.want {
			t.Errorf("%s after %q: got %s, want %s", c.obj, c.key, got, c.want)
		}
	}
	if _, err := spliceAfter([]byte(`[1]`), "a", []byte(`{"p":1}`)); err == nil {
		t.Error("an array took members")
	}
	if _, err := spliceAfter([]byte(`{"a":1}`), "a", []byte(`[1]`)); err == nil {
		t.Error("an array was spliced as members")
	}
}

func TestEach(t *testing.T) {
	var got []string
	err := Each([]byte(`{"c":3,"a":1,"x":9}`), []string{"a", "b", "c"}, func(k string, v json.RawMessage) error {
		got = append(got, k+"="+string(v))
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a=1,c=3" {
		t.Fatalf("got %v, %v; want a=1,c=3 in key order", got, err)
	}
	err = Each([]byte(`{"a":1}`), []string{"a"}, func(string, json.RawMessage) error { return errors.New("bad") })
	if err == nil || !strings.HasPrefix(err.Error(), "a: ") {
		t.Fatalf("an error of fn: %v; want it to name the member", err)
	}
}

func TestMarshal(t *testing.T) {
	v := struct {
		A int    `json:"a"`
		B string `json:"b"`
	}{1, "x"}
	got, err := Marshal(v, "a", []Member{{"p", "ok"}, {"q", 2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":1,"p":"ok","q":2,"b":"x"}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
