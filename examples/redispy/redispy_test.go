// Package redispy runs redis-py's Lock (Python) under lockproof's matrix,
// through the line protocol (docs/LINEPROTO.md): lockproof_redispy.py is
// the adapter, a page of Python a user would write for their own lock.
package redispy

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/lineproto"
	"github.com/lockproof/lockproof/locker"
)

// entry is redis-py's Lock as the README runs it, from the adapter at path.
func entry(t *testing.T, name, path string) locker.Entry {
	t.Helper()
	e, err := lineproto.Entry(lineproto.Config{Name: name, Command: []string{redistest.Python(t), path}, Profile: locker.ProfileLease})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRedisPyUnderTheMatrix runs redis-py's Lock, a polling lock, under
// none, pause-client (the Python process frozen with SIGSTOP right after
// its holder's lease check) and crash-client (SIGKILL), on 2 seeds, on
// real Redis behind Toxiproxy: every row is conclusive and as the lease
// profile predicts.
func TestRedisPyUnderTheMatrix(t *testing.T) {
	redistest.Require(t, true)
	res, err := lockproof.Run(context.Background(), lockproof.Options{
		Locks:  []locker.Entry{entry(t, "redis-py", "lockproof_redispy.py")},
		Faults: []string{contract.FaultNone, contract.FaultPauseClient, contract.FaultCrashClient},
		Seeds:  []uint64{1, 2}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Summary.Scenarios {
		t.Logf("%s: as expected %v, verdicts %v, mismatches %v, fault %s", s.ID(), s.AsExpected, s.Verdicts, s.Mismatches, s.FaultEvidence)
		if s.Fault != contract.FaultNone && (s.FaultError != "" || s.FaultEvidence == "") {
			t.Errorf("%s: the fault did not strike (error %q, evidence %q)", s.ID(), s.FaultError, s.FaultEvidence)
		}
	}
	if len(res.Summary.Scenarios) != 6 {
		t.Fatalf("%d scenarios; want 6", len(res.Summary.Scenarios))
	}
	if res.Status != 0 {
		t.Fatalf("status %d; want 0 (every verdict as the lease profile predicts)", res.Status)
	}
}

// TestBrokenAdapterIsCaught: the adapter with its release turned into a
// plain DEL of the key (no token check) is caught under pause-client: the
// woken holder deletes the next holder's lock (lease violated, not as
// expected).
func TestBrokenAdapterIsCaught(t *testing.T) {
	redistest.Require(t, true)
	src, err := os.ReadFile("lockproof_redispy.py")
	if err != nil {
		t.Fatal(err)
	}
	const good, bad = "        lk.release()\n", "        self.r.delete(lk.name)\n"
	if strings.Count(string(src), good) != 1 {
		t.Fatalf("the adapter no longer releases with one %q line: update this test", strings.TrimSpace(good))
	}
	path := filepath.Join(t.TempDir(), "broken.py")
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), good, bad, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := lockproof.Run(context.Background(), lockproof.Options{
		Locks:  []locker.Entry{entry(t, "redis-py-del", path)},
		Faults: []string{contract.FaultPauseClient}, Seeds: []uint64{1, 2}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	caught := false
	for _, s := range res.Summary.Scenarios {
		t.Logf("%s: as expected %v, verdicts %v", s.ID(), s.AsExpected, s.Verdicts)
		caught = caught || s.Verdict(contract.PropLease) == contract.Violated && !s.AsExpected
	}
	if !caught || res.Status != 1 {
		t.Fatalf("the DEL release was not caught (lease violated, not as expected; status %d)", res.Status)
	}
}

// TestMalformedLineStopsTheClient: an adapter that writes a line that is
// not the protocol's gets an error naming that line of its stdout; the
// scenario reports it (status 3), and the history recorded up to it is
// kept in the run directory.
func TestMalformedLineStopsTheClient(t *testing.T) {
	redistest.Require(t, true)
	src, err := os.ReadFile("lockproof_redispy.py")
	if err != nil {
		t.Fatal(err)
	}
	const at = "        start = time.monotonic()\n"
	if strings.Count(string(src), at) != 1 {
		t.Fatalf("the adapter's serve no longer starts with %q: update this test", strings.TrimSpace(at))
	}
	garble := at + "        if m[\"id\"] == 40:\n            send_raw(\"this is not json\")\n            return\n"
	const raw = "def send_raw(s):\n    with out:\n        sys.stdout.write(s + \"\\n\")\n        sys.stdout.flush()\n\n\ndef main():\n"
	if strings.Count(string(src), "def main():\n") != 1 {
		t.Fatal("the adapter has no one main: update this test")
	}
	bad := strings.Replace(strings.Replace(string(src), at, garble, 1), "def main():\n", raw, 1)
	path := filepath.Join(t.TempDir(), "garbled.py")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := lockproof.Run(context.Background(), lockproof.Options{
		Locks:  []locker.Entry{entry(t, "redis-py-garbled", path)},
		Faults: []string{contract.FaultNone}, Seeds: []uint64{1}, Out: out, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 3 || len(res.Summary.Scenarios) != 1 {
		t.Fatalf("status %d, %d scenarios; want 3 (a scenario failed), 1", res.Status, len(res.Summary.Scenarios))
	}
	s := res.Summary.Scenarios[0]
	t.Logf("error: %s", s.Error)
	if !strings.Contains(s.Error, "stdout line") || !strings.Contains(s.Error, "this is not json") {
		t.Errorf("the scenario's error %q does not name the line and quote it", s.Error)
	}
	if s.History == "" {
		t.Fatal("no history kept")
	}
	h, err := history.ReadFile(filepath.Join(out, s.History))
	if err != nil {
		t.Fatal(err)
	}
	if len(h) < 10 {
		t.Errorf("the history kept %d ops; want those recorded before the line", len(h))
	}
}
