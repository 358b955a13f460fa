package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseQuiet parses args with fs, saying a bad flag in a few lines rather
// than the command's whole flag list (dozens of lines that bury the
// error): the error with the flag's name as typed
// (--name), a "did you mean" when a flag's name is near, and where the
// flags are listed. -h and --help still print the usage and flags.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	if usage == nil {
		usage = fs.PrintDefaults
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
	case err != nil:
		msg := err.Error()
		for _, r := range [][2]string{
			{"flag provided but not defined: -", "unknown flag --"},
			{"flag needs an argument: -", "flag needs an argument: --"},
			{" for flag -", " for flag --"},
		} {
			msg = strings.Replace(msg, r[0], r[1], 1)
		}
		fmt.Fprintf(out, "lockproof %s: %s\n", fs.Name(), msg)
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if s := nearest(strings.TrimLeft(name, "-"), names); s != "" {
				fmt.Fprintf(out, "  did you mean --%s?\n", s)
			}
		}
		fmt.Fprintf(out, "  (lockproof help %s lists its flags)\n", fs.Name())
	}
	return err
}

// nearest returns the name of names closest to typed, when close enough
// to be what was meant: at most one edit away for a short name, two for a
// longer one, or the only name that typed (3 letters or more) begins.
// "" when none is.
func nearest(typed string, names []string) string {
	best, bestD := "", -1
	var prefixed []string
	for _, n := range names {
		if d := editDistance(typed, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			prefixed = append(prefixed, n)
		}
	}
	limit := 1
	if len(typed) > 4 {
		limit = 2
	}
	switch {
	case bestD >= 0 && bestD <= limit && bestD < len(typed):
		return best
	case len(prefixed) == 1:
		return prefixed[0]
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b (bytes: flag and
// command names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
