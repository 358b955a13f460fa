package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// A secret is redacted in every form a text may quote it in: as is, in
// JSON (Go's and Python's escapes, once and twice), %q, a URL.
func TestStringRedactsEveryForm(t *testing.T) {
	const pw = `p<w>&"x\y/z+é😀=1`
	r := New(pw)
	goJSON, _ := json.Marshal(pw)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(pw)
	twice, _ := json.Marshal(string(goJSON))
	texts := []string{
		"AUTH " + pw + " refused",
		`{"redis":{"password":` + string(goJSON) + `}}`,
		`{"redis":{"password":` + strings.TrimSpace(plain.String()) + `}}`,
		`{"error":` + string(twice) + `}`,
		`{"password": "p<w>&\"x\\y/z+\u00e9\ud83d\ude00=1"}`, // Python's json.dumps
		fmt.Sprintf("hello %q", pw),
		fmt.Sprintf("hello %+q", pw),
		"redis://:" + url.QueryEscape(pw) + "@host:6379",
		(&url.URL{Scheme: "redis", User: url.UserPassword("u", pw), Host: "h:1"}).String(),
		"/auth/" + url.PathEscape(pw),
	}
	for _, text := range texts {
		got := r.String(text)
		if !strings.Contains(got, Mark) {
			t.Errorf("%s: no %s in %s", text, Mark, got)
		}
		for _, f := range Forms(pw) {
			if strings.Contains(got, f) {
				t.Errorf("%s: redacted %s still holds %s", text, got, f)
			}
		}
		// The form the text holds is gone, whatever is left around it.
		if strings.Contains(got, "p<w>") || strings.Contains(got, `p\u003cw`) || strings.Contains(got, "p%3Cw") {
			t.Errorf("%s: redacted %s holds part of the secret", text, got)
		}
	}
}

// A secret that holds another is replaced whole; text without a secret,
// short secrets and a nil Redactor change nothing.
func TestStringEdges(t *testing.T) {
	r := New("abcd", "abcdefgh", "", "xyz")
	if got := r.String("1 abcdefgh 2 abcd 3 xyz"); got != "1 "+Mark+" 2 "+Mark+" 3 xyz" {
		t.Errorf("got %q", got)
	}
	if got := r.String("nothing secret"); got != "nothing secret" {
		t.Errorf("got %q", got)
	}
	var nilR *Redactor
	if got := nilR.String("abcd"); got != "abcd" {
		t.Errorf("nil Redactor: %q", got)
	}
	var zero Redactor
	if got := zero.String("abcd"); got != "abcd" {
		t.Errorf("zero Redactor: %q", got)
	}
	zero.Add("abcd")
	if got := zero.String("abcd"); got != Mark {
		t.Errorf("zero Redactor after Add: %q", got)
	}
}

// Secrets added while the Redactor is in use (an environment opened
// mid-run) are redacted from then on; String and Add race with nothing.
func TestAddConcurrent(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			s := fmt.Sprintf("secret-%d", i)
			r.Add(s)
			if got := r.String("x " + s + " y"); got != "x "+Mark+" y" {
				t.Errorf("after Add(%s): %q", s, got)
			}
		})
	}
	wg.Wait()
}

// The log handler redacts the message and every attribute: strings,
// errors, groups, values given to With.
func TestHandler(t *testing.T) {
	const pw = "hunter2-pw"
	var buf bytes.Buffer
	r := New()
	log := slog.New(r.Handler(slog.NewJSONHandler(&buf, nil)))
	r.Add(pw) // after the logger was made: still redacted
	log = log.With("with", "w "+pw)
	log.Error("msg "+pw, "s", pw, "err", errors.New("e "+pw),
		slog.Group("g", "inner", pw), "any", struct{ P string }{pw}, "n", 3)
	out := buf.String()
	if strings.Contains(out, pw) {
		t.Errorf("the log holds the secret: %s", out)
	}
	if n := strings.Count(out, Mark); n != 6 {
		t.Errorf("%d marks, want 6: %s", n, out)
	}
	if !strings.Contains(out, `"n":3`) {
		t.Errorf("other attributes changed: %s", out)
	}
}
