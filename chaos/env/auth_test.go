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

// TestStoreLoginIsNeverPrinted (issue 62, item 6): a consensus store's
// password is redacted as the Redis one is (every verb, Describe,
// DescribeStore) and is among the Secrets a run redacts; Describe says
// the store's login apart.
func TestStoreLoginIsNeverPrinted(t *testing.T) {
	const pw = "store-secret-4f2a"
	a := env.Auth{StoreUsername: "root", StorePassword: pw, StoreTLS: &env.TLS{CAFile: "/ca.pem", CertFile: "/c.pem"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(verb, env.BYOConfig{Auth: a}); strings.Contains(out, pw) {
			t.Errorf("%s prints the store's password: %s", verb, out)
		}
	}
	want := "user root with a password (not shown); TLS, servers checked against /ca.pem, client certificate /c.pem"
	if s := a.DescribeStore(); s != want {
		t.Errorf("DescribeStore: %q; want %q", s, want)
	}
	if s := a.Describe(); strings.Contains(s, pw) || !strings.Contains(s, "store: "+want) {
		t.Errorf("Describe: %q; want the store's login after the Redis one", s)
	}
	if s := (env.Auth{}).DescribeStore(); s != "no login; no TLS" {
		t.Errorf("DescribeStore of no login: %q", s)
	}
	if got := a.Secrets(); len(got) != 1 || got[0] != pw {
		t.Errorf("Secrets: %q; want the store's password", got)
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
	st, err := env.AuthFromEnviron(file, get(map[string]string{
		"LOCKPROOF_STORE_USERNAME": "root", "LOCKPROOF_STORE_PASSWORD": "store-pw", "LOCKPROOF_STORE_TLS_CA": "/store-ca.pem",
	}))
	if err != nil || st.StoreUsername != "root" || st.StorePassword != "store-pw" || st.StoreTLS == nil || st.StoreTLS.CAFile != "/store-ca.pem" || st.TLS != nil {
		t.Errorf("the store's variables: %+v (store TLS %+v), %v; want the store's login and TLS, Redis's TLS untouched", st, st.StoreTLS, err)
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
		"LOCKPROOF_STORE_TLS=false LOCKPROOF_STORE_TLS_KEY=/k.pem":      "LOCKPROOF_STORE_TLS",
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
		{env.Auth{StoreTLS: &env.TLS{CAFile: missing}}, "StoreTLS"},
		{env.Auth{StorePassword: "pw"}, "StorePassword without StoreUsername"},
	} {
		if err := c.a.Check("byo environment"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "byo environment") {
			t.Errorf("%+v: %v; want an error naming %q", c.a, err, c.want)
		}
	}
	if err := (env.Auth{Password: "x", DB: 3, TLS: &env.TLS{InsecureSkipVerify: true}}).Check("x"); err != nil {
		t.Errorf("good settings refused: %v", err)
	}
}

// TestStoreLoginWantsAStore: a store's login on a Redis deployment is
// refused, said rather than ignored, before anything dials.
func TestStoreLoginWantsAStore(t *testing.T) {
	cfg := env.BYOConfig{ToxiproxyURL: "http://127.0.0.1:1", Fenced: "127.0.0.1:2", Data: []string{"127.0.0.1:3"},
		Auth: env.Auth{StoreUsername: "root", StorePassword: "pw-of-the-store"}}
	_, err := env.NewBYO(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "give Etcd or ZooKeeper") || strings.Contains(err.Error(), "pw-of-the-store") {
		t.Errorf("NewBYO: %v; want the store's login refused without a store", err)
	}
}
