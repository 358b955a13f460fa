package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
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
	if err := Visualize(context.Background(), &buf, ops, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"<html", "pause-client a", `write by \"a\" (line 7, token 3, ok)`, "acquire → fail", `held by \u0026#34;b\u0026#34; token 4`} {
		if !strings.Contains(page, want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
}

// TestVisualizeEscapesStates (review, the tool made safe): Porcupine's
// page puts a state's description into innerHTML; a client named with
// markup must come out as text, not as an element.
func TestVisualizeEscapesStates(t *testing.T) {
	evil := `c"><img src=x onerror=alert(1)>`
	ops := []history.Op{
		{Client: evil, Kind: history.Acquire, Key: "k", Call: 1, Return: 2, Completed: true, Result: history.OK, TTLMillis: 1000, Token: 1, HasToken: true, Line: 1},
		{Client: evil, Kind: history.Write, Key: "k", Call: 3, Return: 4, Completed: true, Result: history.OK, Token: 1, HasToken: true, Value: evil, HasValue: true, Line: 2},
	}
	var buf bytes.Buffer
	if err := Visualize(context.Background(), &buf, ops, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	states := regexp.MustCompile(`"StateDescription":("(?:[^"\\]|\\.)*")`).FindAllStringSubmatch(buf.String(), -1)
	if len(states) == 0 {
		t.Fatal("no state description in the page")
	}
	for _, m := range states {
		var d string
		if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(d, "<>") {
			t.Errorf("a state description the page puts into innerHTML holds markup: %q", d)
		}
	}
}

func TestVisualizeBounded(t *testing.T) {
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Visualize(context.Background(), &buf, hardHistory(40), nil, Options{Timeout: 200 * time.Millisecond})
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
	if err := Visualize(context.Background(), &buf, bad, nil, Options{}); !errors.Is(err, history.ErrBadInput) {
		t.Fatalf("bad history: err %v", err)
	}
}

// TestVisualizeMarksDirectViolations: a violation found by a direct rule
// (here a stale unfenced holder, which the linearizability search accepts)
// is marked on the ops it cites, with its explanation; the page starts with
// the verdict and labels each partition with its key and kind.
func TestVisualizeMarksDirectViolations(t *testing.T) {
	ops := lined(
		acq("a", 0, 10, ok, ttl(5)),
		acq("b", 10, 20, ok, ttl(5)),
		wr("a", 20, 21, ok, "x"),
	)
	res, err := Check(context.Background(), ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Of(contract.PropResource).Verdict != contract.Violated || res.Of(contract.PropResource).Violations[0].Rule != RuleStaleHolder {
		t.Fatalf("resource %s %+v, want a stale-holder violation", res.Of(contract.PropResource).Verdict, res.Of(contract.PropResource).Violations)
	}
	var buf bytes.Buffer
	if err := Visualize(context.Background(), &buf, ops, res, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	body := strings.Index(page, "<body>")
	verdict := strings.Index(page, `id="lockproof-verdict"`)
	if body < 0 || verdict < body || verdict > body+100 {
		t.Fatalf("verdict section at %d, body at %d: want the verdict first in the body", verdict, body)
	}
	expl := res.Of(contract.PropResource).Violations[0].Explanation
	for _, want := range []string{
		"Verdict: <span style=\"color:#c0392b\">violated</span>",
		`✗ stale-holder (line 3)`, `✗ stale-holder (line 1)`, `✗ stale-holder (line 2)`, // each cited op, in the data
		`rule stale-holder, key \"k\", lines 1,2,3: `,                               // tooltip with the explanation
		`partition 1: key \"k\", resource ops`, `partition 2: key \"k\", lease ops`, // tag rows: violated first
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(page, strings.ReplaceAll(expl[:40], `"`, `\"`)) || !strings.Contains(page, html.EscapeString(expl)) {
		t.Errorf("page lacks the explanation %q (in the annotations and the header)", expl)
	}
}

// TestVisualizeBoundsTheDrawing: past MaxDrawnOps, partitions are listed as
// not drawn instead of drawn, violated ones kept first.
func TestVisualizeBoundsTheDrawing(t *testing.T) {
	var ops []history.Op
	for i := range MaxDrawnOps/2 + 1 {
		for _, key := range []string{"a", "b"} {
			o := wr("w", float64(2*i), float64(2*i)+1, ok, fmt.Sprint(i))
			o.Key = key
			ops = append(ops, o)
		}
	}
	bad := rd("r", float64(MaxDrawnOps+10), float64(MaxDrawnOps+11), ok, "bogus")
	bad.Key = "b"
	ops = lined(append(ops, bad)...)
	var buf bytes.Buffer
	if err := Visualize(context.Background(), &buf, ops, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`partition 1: key \"b\", resource ops`, `Not drawn`, `key &#34;a&#34; resource ops`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
