package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/reports"
)

// ErrBadMerge: the run directories given to Merge are not the shards of
// one plan (a shard missing, given twice, or of another plan), or out
// cannot take them.
var ErrBadMerge = errors.New("bad merge")

// Merge puts the run directories of a plan's shards (each written by Run
// with Config.Shard, in any order) together into out, as one run of the
// whole plan would have written it: summary.json with every row and cell
// in plan order (the shards' in Index order: a shard is a contiguous run
// of cells, and a cell is never split, so each cell was judged over all
// its seeds), each scenario's directory copied as its shard left it, and
// the report rendered unless noReport. out must be new or empty. Every
// shard of the plan must be there, once.
func Merge(out string, dirs []string, noReport bool) (*contract.Summary, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no run directories", ErrBadMerge)
	}
	type part struct {
		dir  string
		root *os.Root
		sum  *contract.Summary
	}
	parts := make([]part, 0, len(dirs))
	defer func() {
		for _, p := range parts {
			p.root.Close()
		}
	}()
	for _, d := range dirs {
		same, err := sameDir(d, out)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if same {
			return nil, fmt.Errorf("%w: %s is the output directory too", ErrBadMerge, d)
		}
		// Every file of a shard is read through its root, and none may
		// be a link: a shard is untrusted input (a CI artifact), and a
		// scenario directory that linked to ~/.ssh would copy it into
		// the merged output.
		root, err := os.OpenRoot(d)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		parts = append(parts, part{dir: d, root: root})
		if err := notLink(root, contract.SummaryFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err // (a missing one is said by the reader)
		}
		sum, err := readSummaryIn(root, d)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if sum.Shard == nil {
			return nil, fmt.Errorf("%w: %s: not a shard (its summary.json has no \"shard\": run it with --shard K/N)", ErrBadMerge, d)
		}
		parts[len(parts)-1].sum = sum
	}
	slices.SortStableFunc(parts, func(a, b part) int { return a.sum.Shard.Index - b.sum.Shard.Index })
	want := *parts[0].sum.Shard
	if len(parts) != want.Count {
		var given []int
		for _, p := range parts {
			given = append(given, p.sum.Shard.Index)
		}
		return nil, fmt.Errorf("%w: %d run directories for %d shards (given shards %v of 1..%d)", ErrBadMerge, len(parts), want.Count, given, want.Count)
	}
	merged := &contract.Summary{Scenarios: []*contract.Row{}, Topology: parts[0].sum.Topology}
	ids := map[string]string{}
	for i, p := range parts {
		sh := *p.sum.Shard
		if sh.Count != want.Count || sh.Cells != want.Cells {
			return nil, fmt.Errorf("%w: %s is shard %s of a plan of %d cells, %s is shard %s of %d: not one plan", ErrBadMerge, parts[0].dir, parts[0].sum.Shard, want.Cells, p.dir, sh, sh.Cells)
		}
		if p.sum.Topology != merged.Topology {
			return nil, fmt.Errorf("%w: %s ran on the %s topology, %s on the %s one: not one plan", ErrBadMerge, parts[0].dir, contract.TopologyOf(merged.Topology), p.dir, contract.TopologyOf(p.sum.Topology))
		}
		if sh.Index != i+1 {
			return nil, fmt.Errorf("%w: shard %d/%d is missing (or another is given twice)", ErrBadMerge, i+1, want.Count)
		}
		for _, r := range p.sum.Scenarios {
			id := r.ID()
			if id == "." {
				id = contract.ScenarioID(r.Lock, r.Fault, r.Seed)
			}
			if prev, dup := ids[id]; dup {
				return nil, fmt.Errorf("%w: scenario %s is in %s and in %s", ErrBadMerge, id, prev, p.dir)
			}
			ids[id] = p.dir
		}
		merged.Scenarios = append(merged.Scenarios, p.sum.Scenarios...)
		merged.Cells = append(merged.Cells, p.sum.Cells...)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	dst, err := os.OpenRoot(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	defer dst.Close()
	if entries, err := readDirIn(dst, "."); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty", ErrBadMerge, out)
	}
	if _, err := CreateRunDir(out, NewRunID()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	for _, p := range parts {
		for _, r := range p.sum.Scenarios {
			dir := path.Dir(r.History)
			if dir == "." {
				continue
			}
			if err := copyTree(p.root, dst, filepath.FromSlash(dir)); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // a scenario that never ran has no files
				}
				return nil, err
			}
		}
	}
	if err := writeJSONIn(dst, contract.SummaryFile, merged); err != nil {
		return merged, err
	}
	if !noReport {
		run, err := reports.LoadWith(out, reports.LoadOptions{Root: dst})
		if err == nil {
			err = reports.WriteAll(out, reports.Build(run))
		}
		if err != nil {
			return merged, fmt.Errorf("report of %s: %w", out, err)
		}
	}
	return merged, nil
}

// sameDir reports whether a and b name one directory (b may not exist).
func sameDir(a, b string) (bool, error) {
	aa, err := filepath.Abs(a)
	if err != nil {
		return false, err
	}
	bb, err := filepath.Abs(b)
	if err != nil {
		return false, err
	}
	return filepath.Clean(aa) == filepath.Clean(bb), nil
}

// readSummaryIn is ReadSummary reading through root (the run directory
// dir, which names the files in errors).
func readSummaryIn(root *os.Root, dir string) (*contract.Summary, error) {
	run, err := reports.LoadWith(dir, reports.LoadOptions{SummaryOnly: true, Root: root})
	if err != nil {
		return nil, err
	}
	return summaryOf(run), nil
}

// notLink refuses name, inside root, when it or a directory on the way to
// it is a symbolic link (or anything but a directory or a regular file).
// A name that does not exist is fs.ErrNotExist.
func notLink(root *os.Root, name string) error {
	p := ""
	for _, elem := range strings.Split(filepath.ToSlash(name), "/") {
		p = filepath.Join(p, elem)
		fi, err := root.Lstat(p)
		if err != nil {
			fullPath(err, filepath.Join(root.Name(), p))
			return fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if err := plainFile(root, p, fi); err != nil {
			return err
		}
	}
	return nil
}

// plainFile refuses what a merge does not copy: a link, a device, a pipe.
func plainFile(root *os.Root, name string, fi fs.FileInfo) error {
	full := filepath.Join(root.Name(), name)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link: a shard's files are copied, never links (refused; replace it by what it links to, if that is meant)", ErrBadMerge, full)
	case !fi.IsDir() && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file (%s): refused", ErrBadMerge, full, fi.Mode().Type())
	}
	return nil
}

// fullPath makes a path error from inside a root name the whole path p.
func fullPath(err error, p string) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = p
	}
}

// readDirIn lists the directory name inside root.
func readDirIn(root *os.Root, name string) ([]fs.DirEntry, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// copyTree copies the directory dir of src into dst, as the same name,
// through both roots: a link anywhere in it (dir itself, a directory on
// the way to it, a file in it) is refused with an error naming it, and so
// is a file that changes into another while it is copied. A dir that does
// not exist is fs.ErrNotExist.
func copyTree(src, dst *os.Root, dir string) error {
	if err := notLink(src, dir); err != nil {
		return err
	}
	if err := dst.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	entries, err := readDirIn(src, dir)
	if err != nil {
		fullPath(err, filepath.Join(src.Name(), dir))
		return fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		fi, err := src.Lstat(name)
		if err != nil {
			fullPath(err, filepath.Join(src.Name(), name))
			return fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if err := plainFile(src, name, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			if err := copyTree(src, dst, name); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(src, dst, name, fi); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the regular file name (fi, from Lstat) of src into dst,
// a new file there.
func copyFile(src, dst *os.Root, name string, fi fs.FileInfo) (err error) {
	full := filepath.Join(src.Name(), name)
	in, err := src.Open(name)
	if err != nil {
		fullPath(err, full)
		return fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	defer in.Close()
	// Open follows a link made since the Lstat (inside the shard only):
	// what is copied must be the file that was looked at.
	if ofi, err := in.Stat(); err != nil || !os.SameFile(fi, ofi) {
		return fmt.Errorf("%w: %s changed while it was copied (a link put in its place?): refused", ErrBadMerge, full)
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()|0o200)
	if err != nil {
		fullPath(err, filepath.Join(dst.Name(), name))
		return fmt.Errorf("%w: %w", ErrBadMerge, err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("copy %s: %w", full, cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", full, err)
	}
	return nil
}
