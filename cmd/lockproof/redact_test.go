package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/redact/redacttest"
	"github.com/lockproof/lockproof/internal/redisproc"
	"github.com/lockproof/lockproof/internal/redistest"
	"github.com/lockproof/lockproof/runner"
)

// leakyAdapter is a --lock-cmd lock that quotes its hello request, the
// password it is given in it, on its stderr and in its error reply for
// a workload client (lockproof run's check of the process, client
// "check", passes, so the run gets that far), as an adapter that reports
// what it was asked does (issue 62.5). The password hello hands it is
// the harness's endpoint's own (issue 62.1), never the deployment's.
const leakyAdapter = `
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\).*/\1/')
  op=$(printf '%s' "$line" | sed 's/.*"op":"\([a-z]*\)".*/\1/')
  case $op in
  hello)
    echo "adapter: asked $line" >&2
    case $line in
    *'"client":"check"'*) echo "{\"id\":$id,\"result\":\"ok\",\"version\":1,\"ops\":[\"acquire\",\"release\"]}";;
    *'"password"'*)
      esc=$(printf '%s' "$line" | sed 's/\\/\\\\/g; s/"/\\"/g')
      echo "{\"id\":$id,\"result\":\"fail\",\"error\":\"cannot log in with $esc\"}";;
    *) echo "{\"id\":$id,\"result\":\"ok\",\"version\":1,\"ops\":[\"acquire\",\"release\"]}";;
    esac;;
  *) echo "{\"id\":$id,\"result\":\"ok\"}";;
  esac
done
`

// TestRunRedactsTheDeploymentPassword (issue 62.5): lockproof run on a
// bring-your-own Redis that asks a password (LOCKPROOF_REDIS_PASSWORD),
// with a --lock-cmd lock whose process quotes its hello request in its
// error and on its stderr. The scenario fails, and says why, and the
// password is nowhere: hello hands the process the harness's endpoint's
// own password, and no file of the run directory (summary.json, each
// check.json and history, the reports, junit.xml) and nothing the run
// printed holds it.
func TestRunRedactsTheDeploymentPassword(t *testing.T) {
	redistest.Require(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Characters JSON, HTML and URLs escape, and runs of its own that no
	// escape changes (what assertNoSecret looks for).
	const password = "lp-Byo-Secret-A1<&>/+=é-lp-Byo-Secret-B2"
	t.Setenv("LOCKPROOF_REDIS_PASSWORD", password)
	var addrs []string
	for range 2 { // the data node, the fenced resources' Redis
		p, err := redisproc.Start(ctx, redisproc.Config{Password: password})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		addrs = append(addrs, p.Addr)
	}
	toxi, err := env.StartToxiproxy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = toxi.Close(context.Background()) })
	dir := t.TempDir()
	b, err := json.Marshal(env.BYOConfig{ToxiproxyURL: toxi.URL, Data: addrs[:1], Fenced: addrs[1]})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "byo.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(dir, "adapter.sh")
	if err := os.WriteFile(adapter, []byte(leakyAdapter), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	code, stdout, stderr := runRunArgs(t, "--provider", "byo", "--byo-config", cfg, "--lock-cmd", "sh "+adapter,
		"--lock-name", "leaky", "--faults", "none", "--seeds", "1", "--duration", "1s", "--out", out, "-v")
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	sum, err := runner.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	// The run got as far as the adapter's refusal, which it reports.
	if len(sum.Scenarios) != 1 || !strings.Contains(sum.Scenarios[0].Error, "cannot log in with") {
		t.Fatalf("summary %+v: want the scenario failed with the adapter's error", sum.Scenarios)
	}
	// The adapter was handed a password (the harness's endpoint's own),
	// never the deployment's (issue 62.1: it cannot leak what it never had).
	if e := sum.Scenarios[0].Error; !strings.Contains(e, `"password":"`) || strings.Contains(e, password) {
		t.Errorf("error %q: want the endpoint's password quoted, the deployment's nowhere", e)
	}
	files := redacttest.ReadTree(t, out)
	files["(stdout)"], files["(stderr)"] = stdout, stderr
	for _, f := range []string{"summary.json", "report.md", "report.html", "report.json", "junit.xml"} {
		if !strings.Contains(files[f], "cannot log in with") {
			t.Errorf("%s does not say why the scenario failed", f)
		}
	}
	redacttest.AssertNoSecret(t, files, password)
}
