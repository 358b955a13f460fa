package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPropertiesCanGrow: a property added to contract.Properties (with its
// check) leaves every committed run directory readable. The test makes a
// copy of the module, adds a property "grown" there as a developer would
// (one entry, one check), builds that lockproof, and with it reports each
// committed run and compares it with itself: the runs load, report with
// the same exit code as today's lockproof, read the new property as "not
// checked" (never inconclusive), and their summary.json and check.json
// files still re-encode byte for byte (TestCommittedFilesReencode in the
// copy).
func TestPropertiesCanGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a patched copy of the module: not with -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	cp := t.TempDir()
	for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed but gone from the work tree
		}
		if err := os.MkdirAll(filepath.Join(cp, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The new property: one entry in the contract, one check.
	patch(t, filepath.Join(cp, "contract", "properties.go"),
		"\t\t{ID: PropLiveness, Name: PropLivenessName,",
		"\t\t{ID: \"grown\", Name: \"grown\", Guarantee: \"G9\", Letter: \"X\", Summary: \"a property added later\"},\n\t\t{ID: PropLiveness, Name: PropLivenessName,")
	patch(t, filepath.Join(cp, "checker", "checker.go"),
		"\t\tcontract.PropLease: ", // gofmt aligns the map: match its first key alone
		"\t\t\"grown\": (*run).checkLiveness,\n\t\tcontract.PropLease: ")
	bin := filepath.Join(t.TempDir(), "lockproof")
	if out, err := goCmd(cp, "build", "-o", bin, "./cmd/lockproof"); err != nil {
		t.Fatalf("build the copy with a new property: %v\n%s", err, out)
	}
	for _, fixture := range []string{filepath.Join("docs", "example-run"), filepath.Join("reports", "testdata", "run")} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, fixture))); err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		cmd := exec.Command(bin, "report", dir)
		cmd.Stderr = &errOut
		out, _ := cmd.Output()
		code := cmd.ProcessState.ExitCode()
		want, _, _ := runCLI(t, "report", copyOf(t, filepath.Join(root, fixture)))
		if code != want {
			t.Errorf("%s: exit %d with the new property, %d without\nstdout %s\nstderr %s", fixture, code, want, out, errOut.String())
		}
		if strings.Contains(errOut.String(), "no grown verdict") || strings.Contains(string(out), "inconclusive") && want == exitOK {
			t.Errorf("%s: the new property made the old run inconclusive:\n%s%s", fixture, out, errOut.String())
		}
		md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
		if !strings.Contains(string(md), "X grown G9") {
			t.Errorf("%s: report.md does not list the new property", fixture)
		}
		page, _ := filepath.Glob(filepath.Join(dir, "*", "scenario.html"))
		if len(page) == 0 {
			t.Fatalf("%s: no scenario page", fixture)
		}
		if b, _ := os.ReadFile(page[0]); !strings.Contains(string(b), "not checked") {
			t.Errorf("%s: %s does not read the new property as not checked", fixture, page[0])
		}
		cmp := exec.Command(bin, "report", "--compare", filepath.Join(root, fixture), filepath.Join(root, fixture))
		if out, err := cmp.CombinedOutput(); err != nil {
			t.Errorf("%s: report --compare with the new property: %v\n%s", fixture, err, out)
		}
	}
	if out, err := goCmd(cp, "test", "-count=1", "-run", "TestCommittedFilesReencode", "./runner/"); err != nil {
		t.Errorf("the committed files do not re-encode with a new property: %v\n%s", err, out)
	}
}

// patch replaces the one occurrence of old in file by new.
func patch(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), old) != 1 {
		t.Fatalf("%s: %q is not there once: update the test to where a property is added now", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// copyOf copies a run directory to a temporary one (report writes into it).
func copyOf(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}
