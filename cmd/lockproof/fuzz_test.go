package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadBYO: a --byo-config file from anywhere never panics the reader,
// and a refusal names the file and its line ("FILE:LINE: ..."), as every
// bad input here does. Seeds: a deployment of each shape, and broken ones.
func FuzzReadBYO(f *testing.F) {
	for _, s := range []string{
		`{"ToxiproxyURL":"http://127.0.0.1:8474","Sentinels":["127.0.0.1:26379"],"Fenced":"127.0.0.1:6380"}`,
		`{"ToxiproxyURL":"http://127.0.0.1:8474","Cluster":["127.0.0.1:7000"],"Fenced":"127.0.0.1:6380","Username":"u","TLS":{"CAFile":"ca.pem"}}`,
		`{"ToxiproxyURL":"http://127.0.0.1:8474","Etcd":["127.0.0.1:2379"],"Fenced":"127.0.0.1:6380"}`,
		"{\n\"ToxiproxyURL\": 1\n}",
		`{"Nope":true}`,
		`{} {}`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "byo.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// No login variables: what the file says is all there is.
		c, err := readBYO(p, func(string) string { return "" })
		if err != nil {
			if !strings.HasPrefix(err.Error(), p+":") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			return
		}
		if c == nil {
			t.Fatal("no config and no error")
		}
	})
}
