package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// benchHistory is a history of n typical ops (a fenced lock's workload).
func benchHistory(b *testing.B, n int) []byte {
	b.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range n {
		c := fmt.Sprintf("client-%d", i%16)
		t := int64(i) * 1000
		var op Op
		switch i % 4 {
		case 0:
			op = Op{Client: c, Kind: Acquire, Key: "orders", Call: t, Return: t + 500, Completed: true, Result: OK, TTLMillis: 2000, Token: uint64(i), HasToken: true}
		case 1:
			op = Op{Client: c, Kind: Read, Key: "orders", Call: t, Return: t + 500, Completed: true, Result: OK, Token: uint64(i), HasToken: true, Value: "v-123456", HasValue: true}
		case 2:
			op = Op{Client: c, Kind: Write, Key: "orders", Call: t, Return: t + 500, Completed: true, Result: Rejected, Token: uint64(i), HasToken: true, Value: "v-123457", HasValue: true, Prev: "v-123456", HasPrev: true}
		default:
			op = Op{Client: c, Kind: Release, Key: "orders", Call: t, Return: t + 500, Completed: true, Result: OK, Token: uint64(i), HasToken: true}
		}
		if err := w.WriteOp(op); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadAll measures the reader on a 100k-op history.
func BenchmarkReadAll(b *testing.B) {
	data := benchHistory(b, 100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ops, err := ReadAll(bytes.NewReader(data), "bench")
		if err != nil || len(ops) != 100_000 {
			b.Fatal(len(ops), err)
		}
	}
}

// BenchmarkEncodingJSON is the baseline the hand-written reader replaces:
// encoding/json into a struct of pointers, without any validation.
func BenchmarkEncodingJSON(b *testing.B) {
	data := benchHistory(b, 100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	type wire struct {
		Client, Op, Key, Name, Result *string
		Call, Return                  *int64
		TTLMs                         *int64 `json:"ttl_ms"`
		Token                         *uint64
		Value, Prev                   *string
	}
	for b.Loop() {
		d := json.NewDecoder(bytes.NewReader(data))
		for {
			var w wire
			if err := d.Decode(&w); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkWriteOp measures the writer.
func BenchmarkWriteOp(b *testing.B) {
	op := Op{Client: "client-1", Kind: Write, Key: "orders", Call: 1e9, Return: 1e9 + 500, Completed: true, Result: OK, Token: 42, HasToken: true, Value: "v-123457", HasValue: true, Prev: "v-123456", HasPrev: true}
	w := NewWriter(io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteOp(op); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalOp measures Op.UnmarshalJSON, the decoder made for one
// op (a child-process client's ops come so).
func BenchmarkUnmarshalOp(b *testing.B) {
	line := AppendJSON(nil, Op{Client: "c0", Kind: Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: OK, TTLMillis: 500, Token: 7, HasToken: true, Hold: 3})
	b.ReportAllocs()
	for b.Loop() {
		var op Op
		if err := op.UnmarshalJSON(line); err != nil {
			b.Fatal(err)
		}
	}
}
