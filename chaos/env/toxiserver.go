package env

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockproof/lockproof/internal/proc"
)

// ToxiServerEnvVar names a toxiserver binary to run instead of building one:
// for a machine whose go command cannot reach the module proxy. Build it
// from chaos/env/toxiserver (main.go, with go.mod.txt and go.sum.txt
// renamed to go.mod and go.sum).
const ToxiServerEnvVar = "LOCKPROOF_TOXISERVER"

// ErrNoToxiproxy wraps the error of a machine where lockproof can neither
// find nor build its Toxiproxy server.
var ErrNoToxiproxy = errors.New("no toxiproxy server")

// toxiSource is the server's source: upstream's API behind lockproof's guard
// (toxiserver/main.go says why it is a process of its own).
//
//go:embed toxiserver/main.go toxiserver/go.mod.txt toxiserver/go.sum.txt
var toxiSource embed.FS

// ToxiServer is a real Toxiproxy server running as a child process of this
// one, its HTTP API on a free loopback port. Drive it through its API (the
// Toxiproxy client package).
type ToxiServer struct {
	// URL is the API endpoint, http://127.0.0.1:port/token: the server
	// takes requests under its token only (a secret of the run: keep the
	// URL to it).
	URL string
	// API is a client of the API.
	API *toxiclient.Client

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	once  sync.Once
	out   *proc.Tail // the server's output, quoted when it fails
}

// StartToxiproxy starts a Toxiproxy server (building it first, once per
// version, into the user's cache directory) with its API on a free loopback
// port, and waits until the API answers. The server dies with this process.
func StartToxiproxy(ctx context.Context) (*ToxiServer, error) {
	bin, err := BuildToxiproxy(ctx)
	if err != nil {
		return nil, fmt.Errorf("start toxiproxy: %w", err)
	}
	cmd := exec.Command(bin)
	cmd.SysProcAttr = proc.Attr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start toxiproxy: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start toxiproxy: %w", err)
	}
	s := &ToxiServer{cmd: cmd, stdin: stdin, done: make(chan struct{}), out: &proc.Tail{}}
	cmd.Stderr = s.out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start toxiproxy: %s: %w", bin, err)
	}
	announced := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		announced <- strings.TrimSpace(line)
		_, _ = io.Copy(s.out, r)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	fail := func(err error) (*ToxiServer, error) {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
		return nil, fmt.Errorf("start toxiproxy: %w", err)
	}
	select {
	case line := <-announced:
		url, ok := strings.CutPrefix(line, "toxiproxy ")
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
			return fail(fmt.Errorf("%s said %q, not its address; its output: %s", bin, line, s.out))
		}
		s.URL = url
	case <-ctx.Done():
		return fail(fmt.Errorf("%s did not announce its address: %w", bin, ctx.Err()))
	}
	s.API = toxiclient.NewClient(s.URL)
	for {
		if _, err := s.API.Proxies(); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return fail(fmt.Errorf("%s exited; its output: %s", bin, s.out))
		case <-ctx.Done():
			return fail(fmt.Errorf("api not ready: %w", ctx.Err()))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ProxyCount returns how many proxies the server holds: none once it has
// exited (its listeners died with it), -1 when it runs and its API does not
// answer.
func (s *ToxiServer) ProxyCount() int {
	select {
	case <-s.done:
		return 0
	default:
	}
	ps, err := s.API.Proxies()
	if err != nil {
		return -1
	}
	return len(ps)
}

// Close stops the server: it removes every proxy (closing their
// connections) and exits; when it has not by ctx's end, it is killed.
func (s *ToxiServer) Close(ctx context.Context) error {
	s.once.Do(func() { _ = s.stdin.Close() })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("stop toxiproxy: killed: %w", ctx.Err())
	}
}

// BuildToxiproxy returns the path of the Toxiproxy server StartToxiproxy
// runs: ToxiServerEnvVar's, or the one built from lockproof's source of it
// in the user's cache directory (os.UserCacheDir, then lockproof/; without
// one, the temp directory's lockproof-UID/, made 0700), built now when it is
// not there. A cached file is run only when it is a regular file of this
// user's that nobody else may write (not a link); anything else is removed
// and rebuilt (issue 62.12). Building takes the go command, which fetches
// Toxiproxy from the module proxy, and half a minute of CPU once per
// version; StartToxiproxy calls it, and a caller whose first start has a
// short deadline (a test) calls it first with a longer one.
//
// The file's name holds the source's hash, so an upgrade builds anew. One
// process builds at a time (a lock file beside it); the others wait for it.
// The build goes to a temporary name first, so that no process runs a
// half-written file.
func BuildToxiproxy(ctx context.Context) (string, error) {
	if p := os.Getenv(ToxiServerEnvVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrNoToxiproxy, ToxiServerEnvVar, p, err)
		}
		return p, nil
	}
	bin, files, err := toxiBinary()
	if err != nil {
		return "", err
	}
	return buildToxiproxy(ctx, bin, files)
}

// ToxiproxyBuilt reports whether StartToxiproxy would start at once: a
// server is named by ToxiServerEnvVar, or one is built in the cache.
// When not, the first start builds it (half a minute of CPU): a command
// says so before it begins (issue 63.6: the first rows of a run took 40
// s with no word of why).
func ToxiproxyBuilt() bool {
	if os.Getenv(ToxiServerEnvVar) != "" {
		return true
	}
	bin, _, err := toxiBinary()
	if err != nil {
		return false
	}
	fi, err := os.Lstat(bin)
	return err == nil && fi.Mode().IsRegular() && private(fi)
}

// toxiBinary is the cached server's path, named by the hash of its
// source, and that source's files.
func toxiBinary() (string, map[string][]byte, error) {
	files := map[string][]byte{}
	h := sha256.New()
	for _, name := range []string{"main.go", "go.mod.txt", "go.sum.txt"} {
		b, err := toxiSource.ReadFile("toxiserver/" + name)
		if err != nil {
			return "", nil, err
		}
		if name == "main.go" {
			// The tag that keeps it out of lockproof's own builds.
			b = []byte(strings.Replace(string(b), "//go:build ignore\n", "", 1))
		}
		files[strings.TrimSuffix(name, ".txt")] = b
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s/%s\n", runtime.GOOS, runtime.GOARCH)
	dir, err := toxiCacheDir()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	}
	return filepath.Join(dir, "toxiserver-"+hex.EncodeToString(h.Sum(nil))[:16]+exeSuffix()), files, nil
}

// exeSuffix is the suffix of an executable's name here.
func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// buildToxiproxy returns bin, built from files now unless it is there.
func buildToxiproxy(ctx context.Context, bin string, files map[string][]byte) (string, error) {
	dir, exe := filepath.Dir(bin), exeSuffix()
	if ok, err := cachedBinary(bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	} else if ok {
		return bin, nil
	}
	unlock, err := lockFile(ctx, bin+".lock", bin)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	}
	defer unlock()
	if ok, err := cachedBinary(bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	} else if ok {
		return bin, nil // built by the process that held the lock
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: building it needs the go command (not on PATH), or set %s: %w", ErrNoToxiproxy, ToxiServerEnvVar, err)
	}
	src, err := os.MkdirTemp(dir, "toxiserver-src-")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	}
	defer os.RemoveAll(src)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
		}
	}
	tmp := filepath.Join(src, "toxiserver"+exe)
	cmd := exec.CommandContext(ctx, gocmd, "build", "-trimpath", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	var out proc.Tail
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go build of Toxiproxy v2 (github.com/Shopify/toxiproxy, which the go command fetches from the module proxy once) failed, or set %s: %w: %s", ErrNoToxiproxy, ToxiServerEnvVar, err, &out)
	}
	// Writable by this user alone, whatever the umask (cachedBinary
	// runs nothing else).
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoToxiproxy, err)
	}
	return bin, nil
}

// toxiCacheDir returns the directory the server is cached in, made 0700
// if new: lockproof/ in the user's cache directory, or, on a machine
// without one, lockproof-UID/ in the temp directory (issue 62.12: the
// shared temp directory's lockproof/ was anyone's to fill). A directory
// there that is a link, another user's, or writable by others is not used:
// a new private directory of the temp directory is, for this process.
func toxiCacheDir() (string, error) {
	dir := ""
	if cache, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(cache, "lockproof")
	} else {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("lockproof-%d", os.Getuid()))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 && ownedByMe(fi) && !private(fi) {
		// Ours, but writable by others (made by an older lockproof under
		// a lax umask): closed now; what is in it is checked file by file.
		if err := os.Chmod(dir, 0o700); err == nil {
			fi, err = os.Lstat(dir)
			if err != nil {
				return "", err
			}
		}
	}
	if !fi.IsDir() || !private(fi) {
		return os.MkdirTemp("", "lockproof-toxiserver-")
	}
	return dir, nil
}

// cachedBinary says whether the cached server bin may be run: a regular
// file (not a link) of this user's, writable by nobody else. A file there
// that is not is removed, to be rebuilt; none there is false.
func cachedBinary(bin string) (bool, error) {
	fi, err := os.Lstat(bin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.Mode().IsRegular() && private(fi):
		return true, nil
	}
	if err := os.RemoveAll(bin); err != nil {
		return false, fmt.Errorf("%s is not a server lockproof built (a link, another user's, or writable by others), and cannot be removed: %w", bin, err)
	}
	return false, nil
}

// private: fi (from Lstat) is no link, is owned by this process's user
// (where the system says), and is writable by no one else.
func private(fi fs.FileInfo) bool {
	return fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 == 0 && ownedByMe(fi)
}

// lockFile takes the lock file path (created exclusively), waiting while
// another process holds it, until done exists or ctx ends. A lock older
// than the longest build (a process killed while building) is broken.
func lockFile(ctx context.Context, path, done string) (unlock func(), err error) {
	const stale = 10 * time.Minute
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_ = f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > stale {
			_ = os.Remove(path)
			continue
		}
		if _, err := os.Stat(done); err == nil {
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another process's build (%s): %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
