// Package jsonobj builds JSON objects whose members come from more than
// one place, in a fixed order: the contract's rows and the checker's
// result hold one member per property (contract.Properties) beside their
// struct fields, and the files keep the key order they always had.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Member is one member of a JSON object.
type Member struct {
	Key   string
	Value any
}

// Object encodes the members, in order, as a JSON object.
func Object(ms []Member) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Marshal encodes v (a struct, whose JSON form is an object) as
// json.Marshal does, with the members ms inserted, in order, right after
// its member named after (at its end when it has none).
func Marshal(v any, after string, ms []Member) ([]byte, error) {
	obj, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	members, err := Object(ms)
	if err != nil {
		return nil, err
	}
	return spliceAfter(obj, after, members)
}

// spliceAfter returns the JSON object obj with the members of the JSON
// object members inserted right after obj's member named key, or at its
// end when obj has no such member. Both must be compact objects, as
// json.Marshal writes them.
func spliceAfter(obj []byte, key string, members []byte) ([]byte, error) {
	inner := bytes.TrimSpace(members)
	if len(inner) < 2 || inner[0] != '{' || inner[len(inner)-1] != '}' {
		return nil, fmt.Errorf("jsonobj: members %.40q are not an object", members)
	}
	inner = inner[1 : len(inner)-1]
	if len(inner) == 0 {
		return obj, nil
	}
	at, err := endOfMember(obj, key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(inner)+1)
	out = append(out, obj[:at]...)
	if obj[at-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, inner...) // obj[at:] starts with the next ',' or the '}'
	return append(out, obj[at:]...), nil
}

// endOfMember is the offset in obj right after the value of its member
// key, or of its closing brace when it has none.
func endOfMember(obj []byte, key string) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, fmt.Errorf("jsonobj: %.40q is not an object", obj)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, fmt.Errorf("jsonobj: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, fmt.Errorf("jsonobj: %w", err)
		}
		if t == key {
			return int(dec.InputOffset()), nil
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("jsonobj: %w", err)
	}
	return bytes.LastIndexByte(obj, '}'), nil
}

// Each calls fn, in the order of keys, with the value of each member of
// the JSON object obj named by keys (members it lacks are skipped); an
// error of fn comes back naming the member.
func Each(obj []byte, keys []string, fn func(key string, value json.RawMessage) error) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(obj, &raw); err != nil {
		return err
	}
	for _, k := range keys {
		v, ok := raw[k]
		if !ok {
			continue
		}
		if err := fn(k, v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}
