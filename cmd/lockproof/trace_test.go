package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runTraceArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), append([]string{"trace"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

const traceSample = "../../tla/testdata/ok-paused-holder-write-rejected.jsonl"

func TestTraceModule(t *testing.T) {
	code, out, errs := runTraceArgs(t, traceSample)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	if !strings.HasPrefix(out, "---- MODULE TraceData ----\n") || !strings.Contains(out, "Trace == <<") {
		t.Fatalf("stdout is not the TraceData module:\n%s", out)
	}
	if n := strings.Count(out, "[line |-> "); n != 8 {
		t.Errorf("%d events, want 8 (one per history line)", n)
	}

	// --out FILE.tla names the module after the file; flags after FILE work too.
	path := filepath.Join(t.TempDir(), "MyTrace.tla")
	if code, _, errs := runTraceArgs(t, traceSample, "--out", path); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "---- MODULE MyTrace ----\n") {
		t.Errorf("module header %q", strings.SplitN(string(b), "\n", 2)[0])
	}
}

func TestTraceNDJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.ndjson")
	if code, _, errs := runTraceArgs(t, "--out", path, traceSample); code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []int
	for sc.Scan() {
		var e struct {
			Line int    `json:"line"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		lines = append(lines, e.Line)
	}
	// The rejected stale write (line 7) comes after b's accepted write (line 6).
	if len(lines) != 8 || indexOf(lines, 7) < indexOf(lines, 6) {
		t.Errorf("history lines in trace order: %v", lines)
	}
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestTraceBadInput(t *testing.T) {
	dir := t.TempDir()
	unfenced := filepath.Join(dir, "unfenced.jsonl")
	if err := os.WriteFile(unfenced, []byte(
		`{"client":"a","op":"acquire","key":"k","call":0,"return":1,"result":"ok","ttl_ms":100}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.jsonl")
	if err := os.WriteFile(broken, []byte("{\"client\":\"a\",\"op\":\"acquire\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{unfenced}, "line 1"},
		{[]string{broken}, "broken.jsonl:1"},
		{[]string{filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{[]string{}, "want exactly one"},
		{[]string{"--drift", "1.5", traceSample}, "--drift"},
		{[]string{"--settle", "0s", traceSample}, "--settle"},
		{[]string{"--out", filepath.Join(dir, "bad-name.tla"), traceSample}, "module name"},
	} {
		code, _, errs := runTraceArgs(t, c.args...)
		if code != exitBadInput || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d stderr %q, want %d naming %q", c.args, code, errs, exitBadInput, c.want)
		}
	}
}

// --validate: without TLC there is no verdict (exit 3, never a pass); with
// $TLA2TOOLS_JAR the model's verdict, and for a rejection the history line.
func TestTraceValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.jar")
	if code, out, errs := runTraceArgs(t, "--validate", "--tla-jar", missing, traceSample); code != exitUnknown || out != "" || !strings.Contains(errs, "no verdict") {
		t.Fatalf("no TLC: exit %d, stdout %q, stderr %q; want exit %d, no verdict", code, out, errs, exitUnknown)
	}
	if code, _, _ := runTraceArgs(t, "--validate", "--out", filepath.Join(t.TempDir(), "x.tla"), traceSample); code != exitBadInput {
		t.Fatalf("--validate with --out: exit %d, want %d", code, exitBadInput)
	}
	jar := os.Getenv("TLA2TOOLS_JAR")
	if jar == "" {
		t.Skip("TLA2TOOLS_JAR not set: no TLC to run (see tla/README.md)")
	}
	code, out, errs := runTraceArgs(t, "--validate", "--tla-jar", jar, traceSample)
	if code != exitOK || !strings.HasPrefix(out, "accepted: ") {
		t.Fatalf("accepted sample: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	rejected := "../../tla/testdata/violated-two-holders.jsonl"
	code, out, errs = runTraceArgs(t, "--validate", "--tla-jar", jar, rejected)
	if code != exitViolation || !strings.HasPrefix(out, "rejected: "+rejected+":2: ") {
		t.Fatalf("rejected sample: exit %d, stdout %q, stderr %q; want exit %d at line 2", code, out, errs, exitViolation)
	}
}
