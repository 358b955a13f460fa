package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestImageKeepsModesAndLeavesSecrets: a plain file of the build context
// keeps its host mode (a jar 0644, not 0755), and a file not every user
// of the host may read (an admin's 0600 file under the JVM's conf/) is
// left out of the image (issue 62, item 13: every file went in 0755).
func TestImageKeepsModesAndLeavesSecrets(t *testing.T) {
	dir := t.TempDir()
	jar := filepath.Join(dir, "server.jar")
	secret := filepath.Join(dir, "secret.properties")
	if err := os.WriteFile(jar, []byte("jar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("password=hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	archive, _, err := rootfsContext(context.Background(), "FROM scratch\n", nil,
		map[string]string{"usr/share/java/server.jar": jar, "usr/lib/jvm/conf/secret.properties": secret})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
	if m, ok := modes["rootfs/usr/share/java/server.jar"]; !ok || m != 0o644 {
		t.Errorf("the jar: in the image %v, mode %o; want it, 0644", ok, m)
	}
	if _, ok := modes["rootfs/usr/lib/jvm/conf/secret.properties"]; ok {
		t.Error("a 0600 file of the host went into the image")
	}
}
