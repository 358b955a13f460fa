package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/lockproof/lockproof/contract"
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
		dir string
		sum *contract.Summary
	}
	parts := make([]part, 0, len(dirs))
	for _, d := range dirs {
		same, err := sameDir(d, out)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if same {
			return nil, fmt.Errorf("%w: %s is the output directory too", ErrBadMerge, d)
		}
		sum, err := ReadSummary(d)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadMerge, err)
		}
		if sum.Shard == nil {
			return nil, fmt.Errorf("%w: %s: not a shard (its summary.json has no \"shard\": run it with --shard K/N)", ErrBadMerge, d)
		}
		parts = append(parts, part{d, sum})
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
	if entries, err := os.ReadDir(out); err != nil || len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty", ErrBadMerge, out)
	}
	for _, p := range parts {
		for _, r := range p.sum.Scenarios {
			dir := path.Dir(r.History)
			if dir == "." {
				continue
			}
			src := filepath.Join(p.dir, filepath.FromSlash(dir))
			if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
				continue // a scenario that never ran has no files
			}
			if err := os.CopyFS(filepath.Join(out, filepath.FromSlash(dir)), os.DirFS(src)); err != nil {
				return nil, fmt.Errorf("copy %s: %w", src, err)
			}
		}
	}
	if err := writeJSON(filepath.Join(out, contract.SummaryFile), merged); err != nil {
		return merged, err
	}
	if !noReport {
		if err := writeReport(out); err != nil {
			return merged, err
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
