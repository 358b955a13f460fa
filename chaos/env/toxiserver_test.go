package env_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/env"
	"github.com/lockproof/lockproof/internal/toxitest"
)

// TestToxiproxyAPIRefusesBrowsers: a web page open beside a run cannot
// create or change proxies on lockproof's Toxiproxy server (issue 47 item 9):
// a cross-origin text/plain POST, a request a browser marks as its own and
// a DNS-rebound Host are refused, and nothing is created; the Toxiproxy
// client itself still works.
func TestToxiproxyAPIRefusesBrowsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	toxi, err := env.StartToxiproxy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = toxi.Close(context.Background()) }()
	body := `{"name":"evil","listen":"127.0.0.1:0","upstream":"127.0.0.1:1","enabled":true}`
	for _, c := range []struct {
		name   string
		edit   func(*http.Request)
		status int
	}{
		{"a text/plain form post", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, http.StatusUnsupportedMediaType},
		{"a cross-origin fetch", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Origin", "http://evil.example")
		}, http.StatusForbidden},
		{"a browser", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("User-Agent", "Mozilla/5.0")
		}, http.StatusForbidden},
		{"a rebound name", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json")
			r.Host = "evil.example"
		}, http.StatusForbidden},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, toxi.URL+"/proxies", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		c.edit(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.status || toxi.ProxyCount() != 0 {
			t.Errorf("%s: status %d, %d proxies; want %d and none", c.name, resp.StatusCode, toxi.ProxyCount(), c.status)
		}
	}
	p, err := toxi.API.CreateProxy("ok", "127.0.0.1:0", "127.0.0.1:1")
	if err != nil {
		t.Fatalf("the Toxiproxy client: %v", err)
	}
	p.Enabled = false
	if err := p.Save(); err != nil { // text/plain: an update, not a creation
		t.Errorf("the client's update: %v", err)
	}
	if err := toxi.API.ResetState(); err != nil {
		t.Errorf("the client's reset: %v", err)
	}
}

// TestToxiproxyAPIWantsTheToken: another local process that finds the
// API's port cannot use it (issue 62 item 10): a request without the
// run's token, or with another, is refused and creates nothing; under
// the token (the URL the server announced) the API answers.
func TestToxiproxyAPIWantsTheToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	toxi := toxitest.Server(t)
	u, err := url.Parse(toxi.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.Trim(u.Path, "/")) < 32 {
		t.Fatalf("the API's URL %s carries no token", toxi.URL)
	}
	body := `{"name":"evil","listen":"0.0.0.0:0","upstream":"127.0.0.1:1","enabled":true}`
	for _, base := range []string{"http://" + u.Host, "http://" + u.Host + "/" + strings.Repeat("0", 32)} {
		for _, path := range []string{"/proxies", "/version"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST %s%s without the run's token: status %d, want 403", base, path, resp.StatusCode)
			}
		}
	}
	if n := toxi.ProxyCount(); n != 0 {
		t.Fatalf("%d proxies made without the token", n)
	}
	if _, err := toxi.API.Version(); err != nil {
		t.Errorf("the API under its token: %v", err)
	}
}

// TestToxiproxyBuilt: a cache without the server says it is not built
// (the CLI then says it builds it before the run, issue 63.6); the one
// the tests built (TestMain) is; a server named by the environment
// variable is taken as it is.
func TestToxiproxyBuilt(t *testing.T) {
	bin, err := env.BuildToxiproxy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !env.ToxiproxyBuilt() {
		t.Errorf("ToxiproxyBuilt false after BuildToxiproxy gave %s", bin)
	}
	t.Setenv(env.ToxiServerEnvVar, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	if env.ToxiproxyBuilt() {
		t.Error("ToxiproxyBuilt true with an empty cache")
	}
	t.Setenv(env.ToxiServerEnvVar, bin)
	if !env.ToxiproxyBuilt() {
		t.Errorf("ToxiproxyBuilt false with %s=%s", env.ToxiServerEnvVar, bin)
	}
}
