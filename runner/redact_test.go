package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/redact"
	"github.com/lockproof/lockproof/internal/redact/redacttest"
	"github.com/lockproof/lockproof/zoo"
)

// secretEnv is an environment whose servers ask a password lockproof
// made for it (as the process environment's do): nothing else of it is
// used.
type secretEnv struct {
	env.Env
	password string
}

func (e secretEnv) Kind() env.Kind { return env.Process }
func (e secretEnv) Topology() env.Topology {
	return env.Topology{Auth: env.Auth{Password: env.Secret(e.password)}}
}
func (e secretEnv) Close(context.Context) error { return nil }

// TestRunRedactsSecrets: a lock, its process or a server that quotes a
// secret in its errors (the run's configured one, or the password of an
// environment lockproof made), a fault that quotes one in its error or
// its evidence: none of it reaches a file of the run directory, the
// progress lines, the log or the summary Run returns.
func TestRunRedactsSecrets(t *testing.T) {
	const (
		given = `lp-Given-A1<&>"\ /+=é-lp-Given-B2` // Config.Secrets (a deployment's)
		made  = "lp-made-7f3a9c1e"                  // the environment's own
	)
	quoted, _ := json.Marshal(map[string]any{"op": "hello", "redis": map[string]string{"password": given}})
	leak := fmt.Sprintf("hello refused: %s; its stderr ends: AUTH %s / %q", quoted, made, given)
	runner := func(ctx context.Context, e env.Env, sc chaos.Scenario, dir string) (chaos.Outcome, error) {
		sc.Logger.Error("lineproto: protocol broken", "err", errors.New(leak), "line", leak)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return chaos.Outcome{}, err
		}
		if sc.Seed == 2 { // nothing ran: the failed row and its check.json
			return chaos.Outcome{}, errors.New(leak)
		}
		// The history is written as chaos.Run writes it, through sc.Redact.
		f, err := os.Create(filepath.Join(dir, contract.HistoryFile))
		if err != nil {
			return chaos.Outcome{}, err
		}
		defer f.Close()
		rec := history.NewRecorder(f, history.Options{Redact: sc.Redact})
		for _, o := range fakeHistory(sc.Lock) {
			if o.Kind == history.Fault {
				o.Evidence = "its read failed: " + leak
			}
			if err := rec.Record(o); err != nil {
				return chaos.Outcome{}, err
			}
		}
		if err := rec.Close(); err != nil {
			return chaos.Outcome{}, err
		}
		return chaos.Outcome{Ops: rec.Ops(), FaultName: "pause-client a", FaultErr: errors.New("heal: " + leak),
			FaultEvidence: "evidence: " + leak}, errors.New("run: " + leak)
	}
	out := t.TempDir()
	var progress, logs bytes.Buffer
	open := func(ctx context.Context, spec env.Spec) (env.Env, error) { return secretEnv{password: made}, nil }
	sum, err := Run(context.Background(), Config{Registry: zoo.Builtin(), Locks: []string{"set-del"},
		Faults: []string{contract.FaultPauseClient}, Seeds: []uint64{1, 2}, Out: out, Open: open, Runner: runner,
		Progress: &progress, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Secrets: []string{given}})
	if err != nil {
		t.Fatal(err)
	}
	files := redacttest.ReadTree(t, out)
	files["(progress)"], files["(log)"] = progress.String(), logs.String()
	b, _ := json.Marshal(sum)
	files["(Run's summary)"] = string(b)
	for _, secret := range []string{given, made} {
		redacttest.AssertNoSecret(t, files, secret)
	}
	// What was said is still there, with the secret marked.
	if r := sum.Scenarios[0]; !strings.Contains(r.Error, "hello refused") || !strings.Contains(r.Error, redact.Mark) ||
		!strings.Contains(r.FaultError, redact.Mark) || !strings.Contains(r.FaultEvidence, redact.Mark) {
		t.Errorf("row %+v: want its texts kept, the secrets marked", r)
	}
	if !strings.Contains(files["set-del-pause-client-2/check.json"], "not checked: hello refused") {
		t.Errorf("check.json of the failed scenario does not say why:\n%s", files["set-del-pause-client-2/check.json"])
	}
}

// TestRedactRowCoversRow: every text of a summary row is either redacted
// (redactRow: it may quote a lock, a process or a server) or the
// harness's own. A text field added to contract.Row fails here until it
// is put on one side.
func TestRedactRowCoversRow(t *testing.T) {
	redacted := []string{"Error", "FaultError", "FaultEvidence", "TraceError", "TraceDisagrees"}
	own := []string{
		"Lock", "Fault", "History", "Started", "FaultName", "Environment", // names, paths, times
		"Verdicts", "Expected", "MayViolate", "FoundElsewhere", "Trace", "DetectMs", "Stalls", // verdicts and properties
		"Mismatches", "MismatchDetails", // judge's words, from verdicts and the two below
		"Unexcused",       // the checker's lines about a history the recorder redacted
		"After", "Before", // the fault point (SpecRecord)
	}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous {
				walk(f.Type, prefix)
				continue
			}
			if !holdsText(f.Type, map[reflect.Type]bool{}) {
				continue
			}
			if !slices.Contains(redacted, f.Name) && !slices.Contains(own, f.Name) {
				t.Errorf("contract.Row.%s%s holds text: redact it in redactRow, or list it here as the harness's own", prefix, f.Name)
			}
		}
	}
	walk(reflect.TypeFor[contract.Row](), "")

	const pw = "row-secret-9d2e"
	row := &contract.Row{}
	for _, name := range redacted {
		reflect.ValueOf(row).Elem().FieldByName(name).SetString("said " + pw)
	}
	redactRow(redact.New(pw), row)
	for _, name := range redacted {
		if got := reflect.ValueOf(row).Elem().FieldByName(name).String(); got != "said "+redact.Mark {
			t.Errorf("%s = %q after redactRow", name, got)
		}
	}
}

// holdsText says whether a value of typ holds a string somewhere.
func holdsText(typ reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.String:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsText(typ.Elem(), seen)
	case reflect.Map:
		return holdsText(typ.Key(), seen) || holdsText(typ.Elem(), seen)
	case reflect.Struct:
		for i := range typ.NumField() {
			if holdsText(typ.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// TestPrepareRedactsTheDeployment: Prepare takes a bring-your-own
// deployment's passwords into Config.Secrets and redacts them from the
// run's log from then on (the environments' and go-redis's lines go to
// it), even when the deployment is then refused.
func TestPrepareRedactsTheDeployment(t *testing.T) {
	const pw, spw = "lp-byo-data-pw-41", "lp-byo-sentinel-pw-42"
	var logs bytes.Buffer
	cfg := Config{Registry: zoo.Builtin(), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Secrets: []string{"lp-given-43"}}
	byo := &env.BYOConfig{ToxiproxyURL: "http://127.0.0.1:1", Data: []string{"127.0.0.1:1"}, Fenced: "127.0.0.1:1",
		Auth: env.Auth{Password: pw, SentinelPassword: spw}}
	_, err := Prepare(context.Background(), &cfg, env.Options{Kind: env.BYO, BYO: byo})
	if !errors.Is(err, env.ErrUnavailable) { // nothing answers on port 1
		t.Errorf("Prepare: %v; want the deployment refused", err)
	}
	if !slices.Equal(cfg.Secrets, []string{"lp-given-43", pw, spw}) {
		t.Errorf("Secrets %q; want the given one and the deployment's", cfg.Secrets)
	}
	cfg.Logger.Error("login "+pw, "err", errors.New("sentinel "+spw))
	if out := logs.String(); strings.Contains(out, pw) || strings.Contains(out, spw) || strings.Count(out, redact.Mark) != 2 {
		t.Errorf("log: %s; want both passwords redacted", out)
	}
}
