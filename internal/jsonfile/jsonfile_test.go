package jsonfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.json")
	if err := Write(p, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "{\n  \"a\": 1\n}" {
		t.Errorf("file = %q, %v", b, err)
	}
	if err := Write(p, func() {}); err == nil {
		t.Error("a value JSON cannot encode was written")
	}
	if err := Write(filepath.Join(p, "under-a-file"), 1); err == nil {
		t.Error("a path that cannot be written was written")
	}
}
