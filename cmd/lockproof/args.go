package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// parseFileArgs parses args with fs, flags allowed before and after the
// positional arguments, and wants exactly one positional FILE. It returns
// the file and ok, or, when parsing ends the command (bad flags, --help, not
// exactly one FILE, each reported on stderr by fs or here), the exit code
// and !ok.
func parseFileArgs(fs *flag.FlagSet, args []string, stderr io.Writer) (file string, code int, ok bool) {
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
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
