package runner

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// gzSuffix is appended to a history file the run keeps compressed.
const gzSuffix = ".gz"

// kept says which rows keep their files as they are: every row that is not
// as expected or not decided (the evidence a person will open), and per
// lock × fault cell and property the first row that found it violated
// (the counterexample the guarantee sheet links to).
func kept(rows []*contract.Row) []bool {
	keep := make([]bool, len(rows))
	type id struct{ lock, fault, prop string }
	first := map[id]bool{}
	for i, r := range rows {
		if r == nil || r.NotRun {
			continue
		}
		if !r.AsExpected || r.Unknown() {
			keep[i] = true
		}
		for _, p := range contract.PropertyIDs() {
			if r.Verdict(p) != contract.Violated {
				continue
			}
			k := id{r.Lock, r.Fault, p}
			if !first[k] {
				first[k], keep[i] = true, true
			}
		}
	}
	return keep
}

// trim shrinks the run directory out once the rows are judged: the
// histories of rows that kept does not keep are gzip-compressed in place
// (history.jsonl.gz, which every reader of histories reads; the row's
// History names it) and their Porcupine pages removed (`lockproof check
// --html` makes one again from the history). Nothing is lost: every
// history stays checkable. A nightly of 960 scenarios keeps its artifact
// under 100 MB this way (docs/HARNESS.md).
func trim(out string, rows []*contract.Row) error {
	var errs []error
	for i, keep := range kept(rows) {
		r := rows[i]
		if keep || r == nil || r.NotRun || strings.HasSuffix(r.History, gzSuffix) {
			continue
		}
		src := filepath.Join(out, filepath.FromSlash(r.History))
		if err := gzipFile(src, src+gzSuffix); err != nil {
			errs = append(errs, err)
			continue
		}
		r.History += gzSuffix
		vis := filepath.Join(out, filepath.FromSlash(path.Join(path.Dir(r.History), contract.VisualizationFile)))
		if err := os.Remove(vis); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gzipFile compresses src into dst and removes src; on error src stays
// and dst is removed.
func gzipFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("trim: %w", err)
	}
	defer in.Close()
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("trim: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(dst)
		}
	}()
	zw := gzip.NewWriter(f)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("trim %s: %w", src, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("trim %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trim %s: %w", dst, err)
	}
	in.Close()
	if err := os.Remove(src); err != nil {
		return fmt.Errorf("trim: %w", err)
	}
	return nil
}
