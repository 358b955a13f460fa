package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// commandUsage is a command's help: its forms (the usage lines, which name every
// flag it has but the hidden ones: TestUsageLinesNameEveryFlag), then its
// flags as flag.PrintDefaults prints them, without the hidden ones
// (internal flags, such as sim's --worker, that no user types).
func commandUsage(w io.Writer, fs *flag.FlagSet, forms []string, hidden ...string) {
	for i, f := range forms {
		lead := "       "
		if i == 0 {
			lead = "usage: "
		}
		fmt.Fprintln(w, lead+f)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(hidden, f.Name) {
			return
		}
		// As flag.PrintDefaults formats a flag.
		var b strings.Builder
		fmt.Fprintf(&b, "  -%s", f.Name)
		name, text := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		if b.Len() <= 4 {
			b.WriteString("\t")
		} else {
			b.WriteString("\n    \t")
		}
		b.WriteString(strings.ReplaceAll(text, "\n", "\n    \t"))
		if !zeroDefault(f) {
			if name == "string" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

// zeroDefault reports whether f's default is its type's zero value, which
// flag.PrintDefaults does not print.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "<nil>":
		return true
	}
	return false
}
