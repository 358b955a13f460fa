package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockproof/lockproof/runner"
)

// The flag parsers of `lockproof run`.

// maxSeeds bounds a seed list, so that a typo like "1-1000000" is refused
// instead of running for days.
const maxSeeds = 10000

// parseSeeds parses a seed list: comma-separated seeds and inclusive ranges,
// e.g. "1-10", "1,2,5" or "1-3,7". Seeds are kept in the order given;
// duplicates are refused.
func parseSeeds(s string) ([]uint64, error) { return parseSeedsUpTo(s, maxSeeds) }

// parseSeedsUpTo is parseSeeds with a bound of its own (a simulation's
// seeds are cheap).
func parseSeedsUpTo(s string, maxSeeds int) ([]uint64, error) {
	var out []uint64
	seen := map[uint64]bool{}
	add := func(v uint64) error {
		if seen[v] {
			return fmt.Errorf("%w: seeds %q: seed %d given twice", runner.ErrBadConfig, s, v)
		}
		if len(out) == maxSeeds {
			return fmt.Errorf("%w: seeds %q: more than %d seeds", runner.ErrBadConfig, s, maxSeeds)
		}
		seen[v] = true
		out = append(out, v)
		return nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: seeds: empty list (want e.g. 1-10 or 1,2,5)", runner.ErrBadConfig)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: seeds %q: %q is not a seed or a range like 1-10", runner.ErrBadConfig, s, part)
		}
		if !isRange {
			if err := add(a); err != nil {
				return nil, err
			}
			continue
		}
		b, err := strconv.ParseUint(strings.TrimSpace(hi), 10, 64)
		if err != nil || b < a {
			return nil, fmt.Errorf("%w: seeds %q: %q is not a range like 1-10 (low-high, low <= high)", runner.ErrBadConfig, s, part)
		}
		if b-a >= uint64(maxSeeds) {
			return nil, fmt.Errorf("%w: seeds %q: range %q has more than %d seeds", runner.ErrBadConfig, s, part, maxSeeds)
		}
		for v := a; ; v++ {
			if err := add(v); err != nil {
				return nil, err
			}
			if v == b {
				break
			}
		}
	}
	return out, nil
}

// parseNames parses a comma-separated list of names, each one of known
// (what names the flag, for errors). "all" or "" gives known.
func parseNames(what, s string, known []string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return append([]string(nil), known...), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		ok := false
		for _, k := range known {
			ok = ok || k == n
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s: unknown name %q (known: %s)", runner.ErrBadConfig, what, n, strings.Join(known, ","))
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: %s: %q given twice", runner.ErrBadConfig, what, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// splitCommand splits a command line as a POSIX shell would split words:
// on blanks, with '...' taking everything literally, "..." taking all but
// \" \\ \$ \` literally, and a backslash outside quotes escaping the
// next character. It expands nothing (no variables, no globs): the words
// are the program and its arguments, run without a shell.
func splitCommand(s string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		in    bool // a word has begun (an empty "" is a word)
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(rs) && strings.ContainsRune("\"\\$`", rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("%q ends with a lone backslash", s)
			}
			i++
			cur.WriteRune(rs[i])
			in = true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated %c quote", s, quote)
	}
	if in {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%q: no command", s)
	}
	return args, nil
}
