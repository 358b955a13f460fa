package runner

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// MarkerFile is the file that makes a directory a run directory: the
// first file written in it when lockproof makes it (CreateRunDir), holding
// the run's id. lockproof run --force clears only a directory that
// RunDirOf recognises (docs/HARNESS.md).
const MarkerFile = ".lockproof-run"

// markerNote is the marker's note to a reader; legacyMarker is the whole
// marker an earlier lockproof wrote (no id), still recognised.
const (
	markerNote   = "a lockproof run directory: lockproof run --force may clear it"
	legacyMarker = markerNote + "\n"
)

// marker is the marker file's content.
type marker struct {
	Run  string `json:"run"`
	Note string `json:"note"`
}

// NewRunID returns a new run id: 8 random hex digits.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// CreateRunDir makes dir a run directory of the run id when it is new or
// empty: it makes it, and writes the marker first, before anything else is
// written there. It returns the run id the directory's marker holds (id,
// or the one there already); "" for a directory that holds other files and
// no marker of lockproof's, which it leaves unmarked.
func CreateRunDir(dir, id string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if have, err := readMarker(dir); err == nil {
		return have, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if len(ents) > 0 {
		return "", nil
	}
	b, _ := json.Marshal(marker{Run: id, Note: markerNote})
	f, err := os.OpenFile(filepath.Join(dir, MarkerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	return id, nil
}

// readMarker reads dir's marker: the run id it holds ("an earlier
// lockproof's" for the marker without an id that lockproof wrote before
// ids). A marker that is a link, not a regular file, too large, or not one
// lockproof writes is an error saying so.
func readMarker(dir string) (string, error) {
	p := filepath.Join(dir, MarkerFile)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s): not a marker lockproof writes", p, fi.Mode().Type())
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", err
	}
	if string(b) == legacyMarker {
		return "an earlier lockproof's", nil
	}
	var m marker
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.Note != markerNote || !validRunID(m.Run) {
		return "", fmt.Errorf("%s is not a marker lockproof writes (want {\"run\": ID, \"note\": %q})", p, markerNote)
	}
	return m.Run, nil
}

// validRunID: 1 to 64 hex digits.
func validRunID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && len(id)%2 == 0
}

// runFiles are the files a run (and sim --out, report) writes at the root
// of a run directory, beside its scenarios' directories and pages.
var runFiles = []string{
	MarkerFile, contract.SummaryFile, contract.SummaryFile + ".tmp",
	contract.MarkdownFile, contract.HTMLFile, contract.JUnitFile, contract.JSONFile,
	contract.DetectFile, contract.SimFile, contract.RegressionsFile,
}

// ErrNotRunDir: a directory is not one lockproof made.
var ErrNotRunDir = errors.New("not a run directory")

// RunDirOf says whether dir is a run directory lockproof made, and how it
// knows: its marker (MarkerFile, with the run's id); or, for a run
// directory of a lockproof from before the marker, a summary.json that
// lockproof's reader reads as a run's, with at least one scenario, in a
// directory that holds nothing but what a run writes (runFiles, and the
// directory and page of each of the summary's scenarios). Anything else is
// ErrNotRunDir, the error naming what is wrong: a folder that merely holds
// a file named summary.json is not a run directory.
func RunDirOf(dir string) (string, error) {
	id, err := readMarker(dir)
	switch {
	case err == nil:
		return "run " + id + " (its " + MarkerFile + ")", nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %w", ErrNotRunDir, err)
	}
	sum, err := ReadSummary(dir)
	if err != nil {
		return "", fmt.Errorf("%w: it holds no %s, and %s is not a run's: %w", ErrNotRunDir, MarkerFile, contract.SummaryFile, err)
	}
	if len(sum.Scenarios) == 0 {
		return "", fmt.Errorf("%w: it holds no %s, and its %s has no scenarios", ErrNotRunDir, MarkerFile, contract.SummaryFile)
	}
	known := slices.Clone(runFiles)
	for _, r := range sum.Scenarios {
		if id := r.ID(); id != "." {
			known = append(known, id)
			continue
		}
		id := contract.ScenarioID(r.Lock, r.Fault, r.Seed)
		known = append(known, id+".html", id)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotRunDir, err)
	}
	for _, e := range ents {
		if !slices.Contains(known, e.Name()) {
			return "", fmt.Errorf("%w: it holds no %s, and %s is not a file a run writes there (an old run directory is cleared only when it holds nothing else)",
				ErrNotRunDir, MarkerFile, filepath.Join(dir, e.Name()))
		}
	}
	return "a run directory of an earlier lockproof (no " + MarkerFile + "; its " + contract.SummaryFile + " and files are a run's)", nil
}

// DescribeEntries names up to max of names, and how many more there are.
func DescribeEntries(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
