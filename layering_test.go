package lockproof_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLayering holds the packages to the data flow the README and
// docs/DESIGN.md state (workload + faults → history → checker → reports):
// each rule names a package pattern and the lockproof packages it may not
// import. A new import across a line fails here, with the line it crosses.
func TestLayering(t *testing.T) {
	const mod = "github.com/lockproof/lockproof"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "work").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == mod || strings.HasPrefix(imp, mod+"/") {
				imports[f[0]] = append(imports[f[0]], strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/"))
			}
		}
		if _, ok := imports[f[0]]; !ok {
			imports[f[0]] = nil
		}
	}
	under := func(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }
	rules := []struct {
		pkg    string            // a package and those below it
		may    func(string) bool // which lockproof packages it may import
		reason string
	}{
		{"chaos", func(p string) bool { return !under(p, "checker") && !under(p, "reports") && !under(p, "runner") },
			"the producer writes histories; judging them is the checker's, the runner's and the reports' job"},
		{"chaos", func(p string) bool { return !under(p, "internal/simnet/nodes") },
			"a fault's simulated twin acts through chaos.SimNet: the simulation's in-process Redis (miniredis, in internal/simnet/nodes) stays out of a user's module that runs locks in real time"},
		{"chaos", func(p string) bool { return !under(p, "zoo") },
			"the producer runs whatever lock its caller names, from the caller's registry: it pulls in no specimen (a lock's needs come from its locker.Entry)"},
		{"checker", func(p string) bool {
			return p == "contract" || p == "history" || under(p, "internal/jsonobj") || under(p, "checker")
		},
			"the checker reads histories, nothing of how they were made"},
		{"reports", func(p string) bool {
			return !under(p, "chaos") && !under(p, "runner") && !under(p, "lock") && !under(p, "zoo")
		},
			"the reports read run directories"},
		{"contract", func(p string) bool { return p == "internal/jsonobj" },
			"every stage imports the contract: it imports nothing of theirs"},
		{"history", func(p string) bool { return p == "contract" },
			"the history format stands alone"},
		{"lock", func(p string) bool { return p == "internal/rediscmd" || p == "internal/seeded" || under(p, "lock") },
			"the lock we ship imports nothing of the harness"},
		{"lineproto", func(p string) bool { return p == "locker" || p == "internal/proc" || p == "internal/redact" },
			"a lock in its own process is a locker.Locker like any other: the protocol knows nothing of how the harness drives it (it redacts the one secret it hands the process, internal/redact)"},
		{"stores", func(p string) bool { return p == "locker" || p == "contract" || under(p, "stores") },
			"the consensus stores' locks are locker.Lockers like any user's: they know nothing of how the harness drives them"},
		{"runner", func(p string) bool { return !under(p, "zoo") },
			"the runner runs the locks its caller registers (Config.Registry): it names no specimen, and what a lock is predicted to do comes from its entry through package judge"},
		{"sim", func(p string) bool { return !under(p, "runner") && !under(p, "zoo") },
			"the simulation judges through package judge, as the matrix does: it needs nothing of the matrix's runner"},
		{"zoo", func(p string) bool {
			return !under(p, "judge") && !under(p, "checker") && !under(p, "runner") && !under(p, "chaos") && !under(p, "sim") && !under(p, "reports")
		},
			"the locks and their entries are what a user imports (zoo.FencedEntry beside their own lock): their predictions are data, judged elsewhere, so importing zoo pulls in neither the judging nor the checker's Porcupine"},
		{"locker", func(p string) bool { return p == "contract" || p == "fencing" },
			"the interface every lock implements, a user's too: it names the contract's properties and faults and the fencing resources, and nothing of the harness"},
		{"judge", func(p string) bool { return p == "contract" || p == "history" || p == "checker" || p == "locker" },
			"judging reads verdicts, fault windows and predictions: nothing of how a run was made"},
	}
	checked := 0
	for pkg, imps := range imports {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		for _, r := range rules {
			if !under(rel, r.pkg) {
				continue
			}
			checked++
			for _, imp := range imps {
				if !r.may(imp) {
					t.Errorf("%s imports %s: %s", rel, imp, r.reason)
				}
			}
		}
	}
	// The user's front door pulls in no Docker: a module that runs only
	// local processes must not get testcontainers and its dependencies in
	// its go.mod (68 requires with it, 21 without); Options.Docker takes
	// docker.New from those who want it.
	for _, imp := range imports[mod] {
		if under(imp, "chaos/docker") {
			t.Errorf("the root package imports %s: a processes-only user module would pull testcontainers", imp)
		}
	}
	// Nor does lockproof's own module: its go.mod (what go mod tidy needs
	// for every package and test in it) names neither testcontainers nor
	// moby (the Docker environment and the CLI are modules of their own),
	// nor Prometheus (the Toxiproxy server is built apart, chaos/env/
	// toxiserver). A user's module lists lockproof's requirements: 35
	// modules in all with these out, 175 with them in.
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, heavy := range []string{"github.com/testcontainers/", "github.com/moby/", "github.com/docker/", "github.com/prometheus/", "go.opentelemetry.io/"} {
		if strings.Contains(string(gomod), heavy) {
			t.Errorf("go.mod requires %s...: a user's module would pull it (issue 44: at most 40 modules)", heavy)
		}
	}
	if checked < 6 {
		t.Fatalf("only %d packages checked: the rules match nothing (go list output %q)", checked, out)
	}
}
