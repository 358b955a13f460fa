package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/judge"
	"github.com/lockproof/lockproof/locker"
)

// TestPredictFile: run --predict FILE amends a lock-in-a-process's
// profile per fault (issue 63: the CLI gives an adapter its predictions,
// as a Go lock's Entry.Predict); bad input names the file, line and field.
func TestPredictFile(t *testing.T) {
	dir, write := tempFiles(t)
	good := write("good.json", `{
  "pause-client": {"wants": {"lease": "violated", "claims": "may"}, "rejected": false,
                   "why": "no fencing: a paused holder writes late"},
  "*": {"wants": {"notice": "any"}}
}`)
	predict, err := readPredictions(good)
	if err != nil {
		t.Fatal(err)
	}
	e := locker.Entry{Name: "mine", Profile: locker.ProfileFenced, Predict: predict}
	plain := locker.Entry{Name: "plain", Profile: locker.ProfileFenced}
	p := judge.Predict(e, contract.FaultPauseClient)
	if p.Want(contract.PropLease) != contract.WantViolated || p.Want(contract.PropClaims) != contract.WantMay || p.Rejected || !strings.Contains(p.Why, "no fencing") {
		t.Errorf("pause-client: %+v; want lease violated, claims may, nothing rejected, the file's why", p)
	}
	if base := judge.Predict(plain, contract.FaultPauseClient); base.Want(contract.PropLease) == contract.WantViolated || !base.Rejected {
		t.Errorf("the file changed the profile's own prediction: %+v", base)
	}
	q := judge.Predict(e, contract.FaultLatency)
	if q.Want(contract.PropNotice) != contract.WantAny || q.Want(contract.PropLease) != judge.Predict(plain, contract.FaultLatency).Want(contract.PropLease) {
		t.Errorf("latency (the file's *): %+v; want notice any, the rest the profile's", q)
	}
	for _, c := range []struct{ name, body, want string }{
		{"fault", "{\n\"pause-clients\": {}}", "bad-fault.json:2: fault \"pause-clients\""},
		{"prop", "{\"none\":\n {\"wants\": {\"leases\": \"ok\"}}}", "bad-prop.json:2: none.wants: property \"leases\""},
		{"want", "{\"none\": {\"wants\":\n\n {\"lease\": \"broken\"}}}", "bad-want.json:3: none.wants.lease: \"broken\""},
		{"field", "{\"none\": {\"expect\": {}}}", "bad-field.json:1: "},
		{"syntax", "{\"none\":\n {\"wants\": }", "bad-syntax.json:2: "},
		{"trailing", "{} {}", "text after the JSON object"},
		{"null", "null", "got null"},
	} {
		_, err := readPredictions(write("bad-"+c.name+".json", c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := readPredictions(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// tempFiles is a new temporary directory and a function that writes a
// file of it (name, body) and returns its path, failing the test on error.
func tempFiles(t *testing.T) (string, func(name, body string) string) {
	t.Helper()
	dir := t.TempDir()
	return dir, func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}
