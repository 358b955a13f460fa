// Package redacttest holds what the tests of redaction share: reading a
// run directory whole and holding every file of it to a secret.
package redacttest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ReadTree is every file under dir by its slash path relative to dir,
// gzip-compressed ones read as their content.
func ReadTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// AssertNoSecret fails for every file that holds secret, or any run of
// 8 or more letters, digits and hyphens of it: no escape (JSON, once or
// twice, %q, HTML, XML, URL) changes those, so a test secret whose runs
// are its own finds it quoted in any form, or cut in part.
func AssertNoSecret(t testing.TB, files map[string]string, secret string) {
	t.Helper()
	forms := append([]string{secret}, regexp.MustCompile(`[A-Za-z0-9-]{8,}`).FindAllString(secret, -1)...)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for _, f := range forms {
			if i := strings.Index(files[name], f); i >= 0 {
				t.Errorf("%s holds the secret (%q): ...%s...", name, f, files[name][max(0, i-80):min(len(files[name]), i+len(f)+20)])
				break
			}
		}
	}
}
