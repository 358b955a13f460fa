package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// runFlagsFile is the file, in a run directory, holding the flags that
// made the run (those that decide what it runs: runDefining), so that
// --resume continues the same run: a flag not given takes the run's
// value, a flag given with another value is refused by name: a resume
// with other --locks would rewrite a finished run's summary into one of
// the new locks alone, and leave the other scenarios' directories
// unreferenced.
const runFlagsFile = "run-flags.json"

// runDefining are the flags of run that decide what its scenarios are and
// what they do: a resumed run must have the same. The others (--out,
// --parallel, -v, --check-timeout, --tla-jar, --keep-all, --no-report)
// change how it runs or what it keeps, not its rows.
var runDefining = []string{"locks", "faults", "seeds", "duration", "ttl", "clients", "hold", "think", "mix",
	"topology", "provider", "lock-cmd", "lock-env", "lock-name", "profile", "predict", "shard"}

// runFlagsDoc is runFlagsFile's content.
type runFlagsDoc struct {
	// Flags maps a flag's name (no dashes) to its value as the flag
	// prints it.
	Flags map[string]string `json:"flags"`
}

// definingFlags returns the values fs has for runDefining.
func definingFlags(fs *flag.FlagSet) map[string]string {
	m := make(map[string]string, len(runDefining))
	for _, name := range runDefining {
		if fl := fs.Lookup(name); fl != nil {
			m[name] = fl.Value.String()
		}
	}
	return m
}

// writeRunFlags records flags in run directory dir.
func writeRunFlags(dir string, flags map[string]string) error {
	b, err := json.MarshalIndent(runFlagsDoc{Flags: flags}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, runFlagsFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// resumeFlags makes fs continue the run in dir: each defining flag not
// given takes the run's recorded value; one given with another value is
// an error naming every such flag. A run directory made before the flags
// were recorded has none to compare: ok is false then, and nothing is
// changed (the caller says so).
func resumeFlags(fs *flag.FlagSet, dir string) (ok bool, err error) {
	path := filepath.Join(dir, runFlagsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("--resume: %w", err)
	}
	var doc runFlagsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return false, fmt.Errorf("--resume: %s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(doc.Flags)) {
		fl := fs.Lookup(name)
		if fl == nil || !slices.Contains(runDefining, name) {
			return false, fmt.Errorf("--resume: %s: unknown flag %q", path, name)
		}
		want := doc.Flags[name]
		switch {
		case given[name] && fl.Value.String() != want:
			diffs = append(diffs, fmt.Sprintf("--%s %q (the run's: %q)", name, fl.Value.String(), want))
		case !given[name]:
			if err := fs.Set(name, want); err != nil {
				return false, fmt.Errorf("--resume: %s: flag %s: %w", path, name, err)
			}
		}
	}
	if len(diffs) > 0 {
		return false, fmt.Errorf("--resume continues the run in %s with its own flags; these differ: %s (leave them out, or give the run's values)", dir, strings.Join(diffs, ", "))
	}
	return true, nil
}
