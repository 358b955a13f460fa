package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// parseFileArgs parses args with fs, flags allowed before and after the
// positional arguments, and wants exactly one positional FILE. It returns
// the file and ok, or, when parsing ends the command (bad flags, --help, not
// exactly one FILE, each reported on stderr by fs or here), the exit code
// and !ok.
func parseFileArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (file string, code int, ok bool) {
	var files []string
	for rest := args; ; {
		if err := parseQuiet(fs, rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", exitOK, false
			}
			return "", exitBadInput, false
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "lockproof %s: want exactly one history FILE, got %d\n", fs.Name(), len(files))
		fs.Usage()
		return "", exitBadInput, false
	}
	return files[0], exitOK, true
}

// parseFlags parses args with fs. It returns ok, or, when parsing ends
// the command (bad flags reported by fs, or --help), the exit code and !ok.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := parseQuiet(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitBadInput, false
	}
	return exitOK, true
}

// byteSize is a flag value of bytes: a whole number with an optional unit
// (B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB as powers of 1000).
type byteSize uint64

var byteUnits = []struct {
	suffix string
	mult   uint64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}

func (b *byteSize) String() string {
	v := uint64(*b)
	for i := 3; i >= 0; i-- { // TiB down to KiB: the largest that divides evenly
		if u := byteUnits[i]; v != 0 && v%u.mult == 0 {
			return strconv.FormatUint(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(v, 10)
}

func (b *byteSize) Set(s string) error {
	num, mult := s, uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return fmt.Errorf("%q: want a whole number of bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s)
	}
	if v != 0 && v*mult/mult != v {
		return fmt.Errorf("%q: too large", s)
	}
	*b = byteSize(v * mult)
	return nil
}
