package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// RedisRepo is the repository of the locally built Redis image; its tag is a
// hash of every file in it, so a changed redis-server gets a new image.
const RedisRepo = "lockproof/redis"

// ErrNoRedisBinary: the host has no redis-server to put into the local image.
var ErrNoRedisBinary = errors.New("no redis-server on the host to build the image from")

// redisDockerfile runs the host's redis-server from an otherwise empty image.
// redis-sentinel is the same binary, started as "redis-server CONF --sentinel".
const redisDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
WORKDIR /data
EXPOSE 6379
LABEL org.lockproof.image=redis
CMD ["redis-server", "--protected-mode", "no"]
`

// Image says which Redis image an environment runs.
type Image struct {
	// Ref is the image reference (repo:tag).
	Ref string
	// Built is true when this call built the image (false: it existed, or was pulled).
	Built bool
	// Took is how long finding or building the image took.
	Took time.Duration
}

// BuildRedisImage returns the local Redis image, building it first when no
// image with the tag of its inputs exists: FROM scratch, the host's
// redis-server (found on PATH, symlinks resolved), every library ldd lists
// for it at its own path, the dynamic loader, a minimal /etc/passwd, /tmp
// and /data. Nothing is pulled.
func BuildRedisImage(ctx context.Context) (Image, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return Image{}, fmt.Errorf("build redis image: %w: %w", ErrNoRedisBinary, err)
	}
	return buildImage(ctx, RedisRepo, redisDockerfile, map[string]string{"usr/local/bin/redis-server": bin}, nil)
}

// EtcdRepo is the repository of the locally built etcd image, tagged as
// RedisRepo's is.
const EtcdRepo = "lockproof/etcd"

// etcdDockerfile runs the host's etcd from an otherwise empty image.
const etcdDockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
WORKDIR /data
LABEL org.lockproof.image=etcd
`

// BuildEtcdImage returns the local etcd image, built as BuildRedisImage
// builds Redis's: FROM scratch, the host's etcd (Debian's etcd-server)
// and what it links. Nothing is pulled.
func BuildEtcdImage(ctx context.Context) (Image, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return Image{}, fmt.Errorf("build etcd image: no etcd on the host (apt-get install -y etcd-server): %w", err)
	}
	return buildImage(ctx, EtcdRepo, etcdDockerfile, map[string]string{"usr/local/bin/etcd": bin}, nil)
}

// ZooKeeperRepo is the repository of the locally built ZooKeeper image,
// tagged as RedisRepo's is.
const ZooKeeperRepo = "lockproof/zookeeper"

// zkDockerfile runs the host's ZooKeeper on the host's JVM.
const zkDockerfile = `FROM scratch
COPY rootfs/ /
WORKDIR /data
LABEL org.lockproof.image=zookeeper
`

// BuildZooKeeperImage returns the local ZooKeeper image, built as
// BuildRedisImage builds Redis's, out of the host's JVM (the java on
// PATH, its home's bin/java, lib and conf, at their own paths, with
// what their libraries link) and the jars of /usr/share/java (Debian's
// zookeeper.jar names the others in its manifest). Nothing is pulled.
func BuildZooKeeperImage(ctx context.Context) (Image, error) {
	java, err := exec.LookPath("java")
	if err == nil {
		java, err = filepath.EvalSymlinks(java)
	}
	if err != nil {
		return Image{}, fmt.Errorf("build zookeeper image: no java on the host (apt-get install -y zookeeper): %w", err)
	}
	home := filepath.Dir(filepath.Dir(java))
	bins := map[string]string{strings.TrimPrefix(java, "/"): java}
	files := map[string]string{}
	for _, dir := range []string{filepath.Join(home, "lib"), filepath.Join(home, "conf"), "/usr/share/java"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // a dangling link (lib/src.zip without the sources)
			}
			if fi, err := os.Stat(real); err != nil || fi.IsDir() {
				return nil
			}
			// A library whose own libraries are not here (AWT's X11)
			// goes in as it is: the server never loads it.
			if strings.HasSuffix(p, ".so") {
				if _, lerr := sharedLibs(ctx, real); lerr == nil {
					bins[strings.TrimPrefix(p, "/")] = p
					return nil
				}
			}
			files[strings.TrimPrefix(p, "/")] = real
			return nil
		})
		if err != nil {
			return Image{}, fmt.Errorf("build zookeeper image: %w", err)
		}
	}
	return buildImage(ctx, ZooKeeperRepo, zkDockerfile, bins, files)
}

// buildImage returns the local image repo:tag, building it first when no
// image with the tag of its inputs exists: FROM scratch (dockerfile), the
// host's binaries bins (image path -> host path, symlinks resolved), every
// library ldd lists for them at its own path, the dynamic loader, a
// minimal /etc/passwd, /tmp and /data.
func buildImage(ctx context.Context, repo, dockerfile string, bins, files map[string]string) (Image, error) {
	start := time.Now()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("build %s image: docker client: %w", repo, err)
	}
	defer cli.Close()

	archive, tag, err := rootfsContext(ctx, dockerfile, bins, files)
	if err != nil {
		return Image{}, fmt.Errorf("build %s image: %w", repo, err)
	}
	ref := repo + ":" + tag
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return Image{Ref: ref, Took: time.Since(start)}, nil
	} else if !errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("build %s image: inspect %s: %w", repo, ref, err)
	}

	prov, err := testcontainers.NewDockerProvider()
	if err != nil {
		return Image{}, fmt.Errorf("build %s image: docker provider: %w", repo, err)
	}
	defer prov.Close()
	var buildLog bytes.Buffer
	req := &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		ContextArchive: bytes.NewReader(archive),
		Dockerfile:     "Dockerfile",
		Repo:           repo,
		Tag:            tag,
		KeepImage:      true,
		BuildLogWriter: &buildLog,
	}}
	if _, err := prov.BuildImage(ctx, req); err != nil {
		return Image{}, fmt.Errorf("build image %s: %w; build log: %s", ref, err, tail(buildLog.String(), 2000))
	}
	return Image{Ref: ref, Built: true, Took: time.Since(start)}, nil
}

// rootfsContext makes the build context (a tar archive) of dockerfile,
// the binaries bins with what they link and the plain files plain (image
// path -> host path, each), and the tag that names its content.
func rootfsContext(ctx context.Context, dockerfile string, bins, plain map[string]string) ([]byte, string, error) {
	files := map[string]string{} // image path -> host path
	for in, host := range plain {
		// A plain file that not every user of the host may read (an
		// admin's 0600 file under conf/) is no file the server needs,
		// and the image must not hand it to whoever can read images.
		fi, err := os.Stat(host)
		if err != nil {
			return nil, "", fmt.Errorf("stat %s: %w", host, err)
		}
		if fi.Mode().Perm()&0o004 == 0 {
			continue
		}
		files[in] = host
	}
	for in, bin := range bins {
		real, err := filepath.EvalSymlinks(bin)
		if err != nil {
			return nil, "", fmt.Errorf("resolve %s: %w", bin, err)
		}
		libs, err := sharedLibs(ctx, real)
		if err != nil {
			return nil, "", err
		}
		files[in] = real
		for _, l := range libs {
			files[strings.TrimPrefix(l, "/")] = l
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	h := sha256.New()
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) error {
		if dir == "." || dir == "/" || dirs[dir] {
			return nil
		}
		dirs[dir] = true
		fmt.Fprintf(h, "dir %s %o\n", dir, mode)
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: mode, ModTime: now})
	}
	addFile := func(name string, mode int64, data []byte) error {
		parts := strings.Split(path.Dir(name), "/")
		for i := range parts {
			if err := addDir(strings.Join(parts[:i+1], "/"), 0o755); err != nil {
				return err
			}
		}
		fmt.Fprintf(h, "%s %o %d\n", name, mode, len(data))
		h.Write(data)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}

	if err := addFile("Dockerfile", 0o644, []byte(dockerfile)); err != nil {
		return nil, "", fmt.Errorf("build context: %w", err)
	}
	if err := addDir("rootfs", 0o755); err != nil {
		return nil, "", fmt.Errorf("build context: %w", err)
	}
	for _, d := range []string{"rootfs/tmp", "rootfs/data"} {
		if err := addDir(d, 0o1777); err != nil {
			return nil, "", fmt.Errorf("build context: %w", err)
		}
	}
	passwd := "root:x:0:0:root:/data:/sbin/nologin\nredis:x:999:999:redis:/data:/sbin/nologin\n"
	if err := addFile("rootfs/etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, "", fmt.Errorf("build context: %w", err)
	}
	if err := addFile("rootfs/etc/group", 0o644, []byte("root:x:0:\nredis:x:999:\n")); err != nil {
		return nil, "", fmt.Errorf("build context: %w", err)
	}
	for _, n := range names {
		data, err := os.ReadFile(files[n]) // follows symlinks: the loader and libs land as files
		if err != nil {
			return nil, "", fmt.Errorf("build context: read %s: %w", files[n], err)
		}
		fi, err := os.Stat(files[n])
		if err != nil {
			return nil, "", fmt.Errorf("build context: stat %s: %w", files[n], err)
		}
		// Each file keeps its host mode: a jar stays 0644, a binary 0755.
		if err := addFile("rootfs/"+n, int64(fi.Mode().Perm()), data); err != nil {
			return nil, "", fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", fmt.Errorf("build context: %w", err)
	}
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sharedLibs lists the absolute paths ldd prints for bin: each library and
// the dynamic loader (linux-vdso has no path and is skipped).
func sharedLibs(ctx context.Context, bin string) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(lctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
		if i := strings.Index(line, "=>"); i >= 0 {
			line = strings.TrimSpace(line[i+2:])
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("ldd %s: missing library: %s", bin, sc.Text())
			}
			continue
		}
		libs = append(libs, f[0])
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s: no libraries listed (a static binary needs none, but redis-server is dynamic): %q", bin, tail(string(out), 500))
	}
	return libs, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// RedisImage returns the Redis image to run: ref, else the local image
// (BuildRedisImage). A named
// image missing locally is pulled (at most 2 minutes); when that fails the
// local image is built instead and log gets a warning.
func RedisImage(ctx context.Context, ref string, log *slog.Logger) (Image, error) {
	if log == nil {
		log = slog.Default()
	}
	if ref == "" {
		return BuildRedisImage(ctx)
	}
	start := time.Now()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("image %s: docker client: %w", ref, err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return Image{Ref: ref, Took: time.Since(start)}, nil
	} else if !errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("image %s: inspect: %w", ref, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = pull(pctx, cli, ref)
	if err == nil {
		return Image{Ref: ref, Took: time.Since(start)}, nil
	}
	log.Warn("docker environment: cannot pull the Redis image; building the local one instead", "image", ref, "err", err)
	return BuildRedisImage(ctx)
}

func pull(ctx context.Context, cli *testcontainers.DockerClient, ref string) error {
	rc, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("pull %s: not present afterwards: %w", ref, err)
	}
	return nil
}
