package checker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/history"
)

func TestVisualize(t *testing.T) {
	ops, err := history.ReadFile("testdata/violated-paused-holder-write-accepted.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// A failed op, shown as an annotation only.
	ops = append(ops, history.Op{Client: "c", Kind: history.Acquire, Key: "cart", Call: 1, Return: 2, Completed: true,
		Result: history.Fail, TTLMillis: 10, Line: len(ops) + 1})
	var buf bytes.Buffer
	if err := Visualize(context.Background(), &buf, ops, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"<html", "pause-client a", `write by \"a\" (line 7, token 3, ok)`, "acquire → fail", `held by \"b\" token 4`} {
		if !strings.Contains(page, want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
}

func TestVisualizeBounded(t *testing.T) {
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Visualize(context.Background(), &buf, hardHistory(40), Options{Timeout: 200 * time.Millisecond})
	}()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(buf.String(), "<html") {
			t.Fatalf("err %v, %d bytes", err, buf.Len())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Visualize ignored its timeout")
	}
	bad := lined(acq("a", 0, 1, ok), mk(history.Read, "b", "k", 3, 2, ok, val("")))
	if err := Visualize(context.Background(), &buf, bad, Options{}); !errors.Is(err, history.ErrBadInput) {
		t.Fatalf("bad history: err %v", err)
	}
}
