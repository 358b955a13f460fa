package mutant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RunMarker is the file that marks a run directory of lockproof
// (contract's .lockproof-run): a copy of the source leaves such
// directories out.
const RunMarker = ".lockproof-run"

// CopyTree copies the source tree src into dst (which must exist) for a
// mutant to be applied to: the files git lists as the tree's (tracked, and
// untracked but not ignored), or, outside a git work tree, every file. It
// copies regular files only (a symbolic link is left out: the copy must
// hold nothing that leads out of it), and leaves out .git, every run
// directory (one holding RunMarker) and each path of skip (the run
// directory the copy is made for, when it lies inside src). ctx bounds the
// git command.
func CopyTree(ctx context.Context, src, dst string, skip ...string) error {
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	var skipAbs []string
	for _, s := range append(skip, dst) {
		a, err := filepath.Abs(s)
		if err != nil {
			return err
		}
		skipAbs = append(skipAbs, a)
	}
	skipped := func(p string) bool {
		for _, s := range skipAbs {
			if p == s || strings.HasPrefix(p, s+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	files, err := gitFiles(ctx, src)
	if err != nil {
		if files, err = walkFiles(src); err != nil {
			return err
		}
	}
	runDir := map[string]bool{}
	inRunDir := func(rel string) bool {
		for d := filepath.Dir(rel); d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
			v, ok := runDir[d]
			if !ok {
				_, err := os.Lstat(filepath.Join(src, d, RunMarker))
				v = err == nil
				runDir[d] = v
			}
			if v {
				return true
			}
		}
		return false
	}
	for _, rel := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		abs := filepath.Join(src, rel)
		if !filepath.IsLocal(rel) || skipped(abs) || inRunDir(rel) || isGitPath(rel) {
			continue
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // listed by git, gone from the work tree
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(abs)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, b, fi.Mode().Perm()|0o200); err != nil {
			return err
		}
	}
	return nil
}

// isGitPath reports whether rel is git's own (.git, a directory or the
// file a worktree has).
func isGitPath(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return first == ".git"
}

// gitFiles lists the files of the git work tree at root.
func gitFiles(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, filepath.FromSlash(f))
		}
	}
	return files, nil
}

// walkFiles lists every regular file under root, relative to it, but
// those under .git.
func walkFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// ModuleRoot finds the lockproof source tree: dir or the nearest
// directory above it whose go.mod declares module, or "" when there is
// none.
func ModuleRoot(dir, module string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == module {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// modulePath is the module path a go.mod declares ("" if none).
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
