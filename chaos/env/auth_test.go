package env_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/chaos/env"
)

// TestSecretIsNeverPrinted: a password formatted with any verb, alone or
// inside a config, reads "xxxxx"; JSON (a child process's spec) carries
// it.
func TestSecretIsNeverPrinted(t *testing.T) {
	const pw = "hunter2-very-secret"
	cfg := env.BYOConfig{ToxiproxyURL: "http://t:1", Auth: env.Auth{Username: "app", Password: pw, SentinelPassword: pw}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{cfg.Password, cfg, &cfg, cfg.Auth} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
				t.Errorf("%s of %T prints the password: %s", verb, v, out)
			}
		}
	}
	if s := cfg.Auth.Describe(); strings.Contains(s, pw) || !strings.Contains(s, "user app with a password (not shown)") {
		t.Errorf("Describe: %q", s)
	}
	b, err := json.Marshal(cfg.Auth)
	if err != nil || !strings.Contains(string(b), pw) {
		t.Errorf("JSON %s, %v: a child process is handed the password in its spec", b, err)
	}
	var back env.Auth
	if err := json.Unmarshal(b, &back); err != nil || back.Password != pw {
		t.Errorf("JSON round trip: %v, password kept: %v", err, back.Password == pw)
	}
	if got := fmt.Sprint(env.Secret("")); got != "" {
		t.Errorf("an unset secret prints %q; want nothing", got)
	}
	// What a run redacts: the passwords set, not the username.
	if got := cfg.Auth.Secrets(); len(got) != 2 || got[0] != pw || got[1] != pw {
		t.Errorf("Secrets: %q; want the password and the Sentinels'", got)
	}
	if got := (env.Auth{Username: "app", SentinelPassword: "s-pw"}).Secrets(); len(got) != 1 || got[0] != "s-pw" {
		t.Errorf("Secrets of a Sentinel password alone: %q", got)
	}
}

// TestAuthFromEnviron: the login variables fill or override a config's,
// bad values are refused naming the variable, and TLS is turned on by
// any of its variables.
func TestAuthFromEnviron(t *testing.T) {
	get := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	file := env.Auth{Username: "from-file", Password: "file-pw", DB: 2}
	a, err := env.AuthFromEnviron(file, get(map[string]string{
		"LOCKPROOF_REDIS_PASSWORD": "env-pw", "LOCKPROOF_SENTINEL_USERNAME": "s", "LOCKPROOF_SENTINEL_PASSWORD": "spw",
		"LOCKPROOF_REDIS_DB": "5", "LOCKPROOF_REDIS_TLS_CA": "/ca.pem", "LOCKPROOF_REDIS_TLS_SERVER_NAME": "redis.internal",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if a.Username != "from-file" || a.Password != "env-pw" || a.SentinelUsername != "s" || a.SentinelPassword != "spw" || a.DB != 5 ||
		a.TLS == nil || a.TLS.CAFile != "/ca.pem" || a.TLS.ServerName != "redis.internal" || a.TLS.InsecureSkipVerify {
		t.Errorf("got %+v (TLS %+v)", a, a.TLS)
	}
	if a, err := env.AuthFromEnviron(file, get(nil)); err != nil || a != file {
		t.Errorf("no variables: %+v, %v; want the config's login unchanged", a, err)
	}
	if a, err := env.AuthFromEnviron(env.Auth{}, get(map[string]string{"LOCKPROOF_REDIS_TLS": "true"})); err != nil || a.TLS == nil {
		t.Errorf("LOCKPROOF_REDIS_TLS=true: %+v, %v; want TLS with the system's roots", a, err)
	}
	withTLS := env.Auth{TLS: &env.TLS{CAFile: "/x"}}
	if a, err := env.AuthFromEnviron(withTLS, get(map[string]string{"LOCKPROOF_REDIS_TLS": "0"})); err != nil || a.TLS != nil {
		t.Errorf("LOCKPROOF_REDIS_TLS=0: %+v, %v; want TLS off", a, err)
	}
	for vars, want := range map[string]string{
		"LOCKPROOF_REDIS_DB=x":                                          "LOCKPROOF_REDIS_DB",
		"LOCKPROOF_REDIS_DB=-1":                                         "LOCKPROOF_REDIS_DB",
		"LOCKPROOF_REDIS_TLS=maybe":                                     "LOCKPROOF_REDIS_TLS",
		"LOCKPROOF_REDIS_TLS=false LOCKPROOF_REDIS_TLS_CA=/ca.pem":      "turn it on",
		"LOCKPROOF_REDIS_TLS_INSECURE=perhaps LOCKPROOF_REDIS_TLS=true": "LOCKPROOF_REDIS_TLS_INSECURE",
	} {
		m := map[string]string{}
		for _, kv := range strings.Fields(vars) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		if _, err := env.AuthFromEnviron(env.Auth{}, get(m)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error naming %s", vars, err, want)
		}
	}
}

// TestAuthCheck: settings that cannot make a client are refused with
// the field named, before anything dials.
func TestAuthCheck(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.pem")
	for _, c := range []struct {
		a    env.Auth
		want string
	}{
		{env.Auth{DB: -1}, "DB = -1"},
		{env.Auth{TLS: &env.TLS{CAFile: missing}}, "CAFile"},
		{env.Auth{TLS: &env.TLS{CertFile: "/c.pem"}}, "CertFile and KeyFile together"},
		{env.Auth{TLS: &env.TLS{CertFile: missing, KeyFile: missing}}, "CertFile, KeyFile"},
	} {
		if err := c.a.Check("byo environment"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "byo environment") {
			t.Errorf("%+v: %v; want an error naming %q", c.a, err, c.want)
		}
	}
	if err := (env.Auth{Password: "x", DB: 3, TLS: &env.TLS{InsecureSkipVerify: true}}).Check("x"); err != nil {
		t.Errorf("good settings refused: %v", err)
	}
}
