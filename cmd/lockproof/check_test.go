package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

func runCheckArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), append([]string{"check"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func oneLine(t *testing.T, s string) string {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("stdout is not exactly one line: %q", s)
	}
	return strings.TrimSuffix(s, "\n")
}

// TestCheckExamples: each shared example gives the exit code its name says,
// with one verdict line naming the property and lines of a violation.
func TestCheckExamples(t *testing.T) {
	want := map[string]struct {
		code       int
		line, tail string // the line starts with line and ends with tail (a property added later goes between)
	}{
		"ok-fenced-handoff.jsonl":                     {0, "ok: lease ok, resource ok, liveness n/a, claims n/a, notice n/a, fairness n/a", " (8 ops, 1 keys)"},
		"ok-paused-holder-write-rejected.jsonl":       {0, "ok: lease ok, resource ok, liveness n/a, claims n/a, notice n/a, fairness n/a", " (8 ops, 1 keys)"},
		"ok-unknown-acquire.jsonl":                    {0, "ok: lease ok, resource n/a, liveness n/a, claims n/a, notice n/a, fairness n/a", " (3 ops, 1 keys)"},
		"violated-two-holders.jsonl":                  {1, "violated: lease mutual exclusion: lines 1,2: ", ""},
		"violated-paused-holder-write-accepted.jsonl": {1, "violated: resource safety: lines 6,7: ", ""},
	}
	files, _ := filepath.Glob("testdata/check/*.jsonl")
	if len(files) != len(want) {
		t.Fatalf("examples: %d files, want %d", len(files), len(want))
	}
	for _, f := range files {
		w := want[filepath.Base(f)]
		code, out, errs := runCheckArgs(t, f)
		line := oneLine(t, out)
		if code != w.code || !strings.HasPrefix(line, w.line) || !strings.HasSuffix(line, w.tail) {
			t.Errorf("%s: exit %d, %q; want exit %d, %q...\nstderr: %s", f, code, line, w.code, w.line, errs)
		}
		if code == exitViolation && !strings.Contains(errs, f+": ") {
			t.Errorf("%s: stderr does not detail the violation: %q", f, errs)
		}
	}
}

func TestCheckFlagsAndOutputs(t *testing.T) {
	dir := t.TempDir()
	html, js := filepath.Join(dir, "v.html"), filepath.Join(dir, "check.json")
	f := "testdata/check/violated-paused-holder-write-accepted.jsonl"
	// Flags after FILE work too.
	code, out, errs := runCheckArgs(t, "--drift", "0.05", f, "--html", html, "--json", js, "--timeout", "10s")
	if code != exitViolation {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, out)
	b, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(b, []byte("<html")) || !bytes.Contains(b, []byte("pause-client a")) {
		t.Fatalf("html: %v (%d bytes, want the page with the fault annotation)", err, len(b))
	}
	var res checker.Result
	b, err = os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Verdict != contract.Violated || res.Of(contract.PropResource).Verdict != contract.Violated || res.Options.Drift != 0.05 {
		t.Fatalf("check.json: %+v", res)
	}
}

func TestCheckBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	content := `{"client":"a","op":"acquire","key":"k","call":0,"return":1,"result":"ok","ttl_ms":100,"token":1}
{"client":"b","op":"acquire","key":"k","call":5,"return":3,"result":"ok"}
`
	if err := os.WriteFile(bad, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCheckArgs(t, bad)
	line := oneLine(t, out)
	if code != exitBadInput || !strings.Contains(line, bad+":2:") || !strings.Contains(line, "return") {
		t.Fatalf("exit %d, %q; want exit 2 naming %s:2 and the field", code, line, bad)
	}
	cases := [][]string{
		{},                                    // no file
		{"a.jsonl", "b.jsonl"},                // two files
		{"--drift", "1.5", "x.jsonl"},         // drift out of range
		{"--nope", "x.jsonl"},                 // unknown flag
		{filepath.Join(dir, "missing.jsonl")}, // missing file
		{"--slack", "-1s", "x.jsonl"},         // negative slack
	}
	for _, args := range cases {
		if code, out, errs := runCheckArgs(t, args...); code != exitBadInput {
			t.Errorf("%v: exit %d (stdout %q, stderr %q), want 2", args, code, out, errs)
		}
	}
}

// TestCheckTimeoutIsUnknown: a search that runs out of time exits 3 and says which key.
func TestCheckTimeoutIsUnknown(t *testing.T) {
	var ops []history.Op
	n := 40
	for i := 0; i < n; i++ {
		ops = append(ops, history.Op{Client: fmt.Sprintf("w%d", i), Kind: history.Write, Key: "hot", Call: int64(i),
			Result: history.Unknown, Value: fmt.Sprint(i), HasValue: true})
	}
	for i := 0; i < n; i++ {
		ops = append(ops, history.Op{Client: "r", Kind: history.Read, Key: "hot", Call: int64(1000 + 2*i), Return: int64(1001 + 2*i),
			Completed: true, Result: history.OK, Value: fmt.Sprint((i * 7) % n), HasValue: true})
	}
	ops = append(ops, history.Op{Client: "r", Kind: history.Read, Key: "hot", Call: 5000, Return: 5001, Completed: true,
		Result: history.OK, Value: "never written", HasValue: true})
	path := filepath.Join(t.TempDir(), "hard.jsonl")
	if err := history.WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCheckArgs(t, "--timeout", "200ms", path)
	line := oneLine(t, out)
	if code != exitUnknown || !strings.HasPrefix(line, "unknown: ") || !strings.Contains(line, `key "hot"`) {
		t.Fatalf("exit %d, %q; want exit 3 naming key hot", code, line)
	}
}

// buildBinary builds the lockproof binary into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockproof")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binary: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestCheckBinary builds the lockproof binary and runs it on the examples.
func TestCheckBinary(t *testing.T) {
	bin := buildBinary(t)
	files, _ := filepath.Glob("testdata/check/*.jsonl")
	for _, f := range files {
		cmd := exec.Command(bin, "check", f)
		var out bytes.Buffer
		cmd.Stdout = &out
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		want := 0
		if strings.HasPrefix(filepath.Base(f), "violated-") {
			want = 1
		}
		line := oneLine(t, out.String())
		if code != want || !strings.HasPrefix(line, map[int]string{0: "ok: ", 1: "violated: "}[want]) {
			t.Errorf("%s: exit %d, %q; want exit %d", f, code, line, want)
		}
	}
}

// TestCheckInputsThatMustNotPass: inputs that used to pass or lose their
// verdict. An empty history (or faults only) is bad input; a string that is
// not valid UTF-8 is bad input naming file, line and field (decoded as
// U+FFFD it merged two clients and hid a violation); a failing --html or
// --json write keeps the verdict line and its exit code.
func TestCheckInputsThatMustNotPass(t *testing.T) {
	dir, write := tempFiles(t)
	empty := write("empty.jsonl", "")
	faults := write("faults.jsonl", `{"op":"fault","name":"partition","call":1,"return":2}`+"\n")
	// Two clients whose names differ only in an invalid byte: as U+FFFD both
	// became one client and the two leases looked reentrant.
	utf := write("utf8.jsonl", "{\"client\":\"a\",\"op\":\"acquire\",\"key\":\"k\",\"call\":0,\"return\":1,\"result\":\"ok\",\"ttl_ms\":1000,\"token\":1}\n"+
		"{\"client\":\"c\xff\",\"op\":\"acquire\",\"key\":\"k\",\"call\":2,\"return\":3,\"result\":\"ok\",\"ttl_ms\":1000,\"token\":2}\n"+
		"{\"client\":\"c\xfe\",\"op\":\"acquire\",\"key\":\"k\",\"call\":4,\"return\":5,\"result\":\"ok\",\"ttl_ms\":1000,\"token\":3}\n")
	for _, c := range []struct {
		file, want string
	}{
		{empty, "no operations"},
		{faults, "no operations"},
		{utf, utf + ":2: client: invalid UTF-8 byte 0xff"},
	} {
		code, out, errs := runCheckArgs(t, c.file)
		if line := oneLine(t, out); code != exitBadInput || !strings.HasPrefix(line, "bad input: ") || !strings.Contains(line, c.want) {
			t.Errorf("%s: exit %d, %q (stderr %q); want exit 2 with %q", filepath.Base(c.file), code, line, errs, c.want)
		}
	}

	violated := "testdata/check/violated-two-holders.jsonl"
	for _, flag := range []string{"--html", "--json"} {
		code, out, errs := runCheckArgs(t, flag, filepath.Join(dir, "no-such-dir", "out"), violated)
		line := oneLine(t, out)
		if code != exitViolation || !strings.HasPrefix(line, "violated: ") || !strings.Contains(errs, "no-such-dir") {
			t.Errorf("%s write error: exit %d, %q, stderr %q; want the violation (exit 1) and the error on stderr", flag, code, line, errs)
		}
	}
}

// TestCheckHeapBudgetIsUnknown: a check that passes its heap budget stops
// and exits 3, saying so.
func TestCheckHeapBudgetIsUnknown(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	var ops []history.Op
	for i := 0; i < 40; i++ {
		ops = append(ops, history.Op{Client: fmt.Sprintf("w%d", i), Kind: history.Write, Key: "hot", Call: int64(i),
			Result: history.Unknown, Value: fmt.Sprint(i), HasValue: true})
	}
	for i := 0; i < 40; i++ {
		ops = append(ops, history.Op{Client: "r", Kind: history.Read, Key: "hot", Call: int64(1000 + 2*i), Return: int64(1001 + 2*i),
			Completed: true, Result: history.OK, Value: fmt.Sprint((i * 7) % 40), HasValue: true})
	}
	path := filepath.Join(t.TempDir(), "hard.jsonl")
	if err := history.WriteFile(path, ops); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	budget := fmt.Sprint(ms.HeapAlloc + 64<<20) // 64 MiB above what the test process holds now
	code, out, _ := runCheckArgs(t, "--max-heap", budget, "--timeout", "2m", path)
	line := oneLine(t, out)
	if code != exitUnknown || !strings.Contains(line, "heap budget exhausted") {
		t.Fatalf("exit %d, %q; want exit 3 naming the heap budget", code, line)
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "512": 512, "4GiB": 4 << 30, "512MiB": 512 << 20, "2GB": 2e9, "1KiB": 1024} {
		var b byteSize
		if err := b.Set(in); err != nil || uint64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5GiB", "GiB", "99999999999TiB", "4 parsecs"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted: %d", in, b)
		}
	}
	b := byteSize(4 << 30)
	if b.String() != "4GiB" {
		t.Errorf("String = %q", b.String())
	}
}

// TestCheckDriftZeroIsExact: --drift 0 checks with no drift at all
// (checker.NoDrift): a lease taken at 0 with a 100ms TTL is surely valid
// until 100ms inclusive, so another client's acquire at exactly 100ms
// breaks mutual exclusion; with the default drift it does not. Before,
// --drift 0 ran with 1e-12, which moved the bound 1ns the lenient way.
func TestCheckDriftZeroIsExact(t *testing.T) {
	f := filepath.Join(t.TempDir(), "edge.jsonl")
	h := `{"client":"a","op":"acquire","key":"k","call":0,"return":1000000,"result":"ok","ttl_ms":100,"token":1}
{"client":"b","op":"acquire","key":"k","call":100000000,"return":100000000,"result":"ok","ttl_ms":100,"token":2}
`
	if err := os.WriteFile(f, []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCheckArgs(t, "--drift", "0", f); code != exitViolation {
		t.Errorf("--drift 0: exit %d, want a violation; stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCheckArgs(t, f); code != exitOK {
		t.Errorf("default drift: exit %d, want ok; stdout %q, stderr %q", code, out, errs)
	}
}

// TestCheckFootprint: --footprint states the lock's bound: a sample above
// it is a violation (footprint-bound); without it the property is n/a; a
// malformed bound is bad input.
func TestCheckFootprint(t *testing.T) {
	f := filepath.Join(t.TempDir(), "leak.jsonl")
	h := `{"client":"a","op":"acquire","key":"k","call":0,"return":1000000,"result":"ok","ttl_ms":1000,"token":1,"lease":1}
{"client":"b","op":"footprint","key":"k","call":2000000,"return":3000000,"result":"ok","records":40,"bytes":900}
`
	if err := os.WriteFile(f, []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCheckArgs(t, "--footprint", "7,1,2,4", f); code != exitViolation || !strings.Contains(errs, checker.RuleFootprintBound) {
		t.Errorf("--footprint 7,1,2,4: exit %d, want a footprint-bound violation; stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCheckArgs(t, "--footprint", "40,0,0,0,2h", f); code != exitOK {
		t.Errorf("--footprint 40,0,0,0,2h: exit %d, want ok; stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCheckArgs(t, f); code != exitOK {
		t.Errorf("no bound: exit %d, want ok (n/a); stdout %q, stderr %q", code, out, errs)
	}
	if code, _, _ := runCheckArgs(t, "--footprint", "7,1", f); code != exitBadInput {
		t.Errorf("--footprint 7,1: exit %d, want bad input", code)
	}
}
