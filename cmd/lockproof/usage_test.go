package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestUsageLinesNameEveryFlag (issue 63.4): every command's usage lines
// name each flag its help lists (run's left out --lock-cmd, --plan,
// --resume and --force; check's 5 of its 11), and no internal flag (sim's
// --worker) is shown. A flag added without its place in a usage line
// fails here.
func TestUsageLinesNameEveryFlag(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	for name := range commands() {
		var out, errb bytes.Buffer
		dispatch(context.Background(), []string{"help", name}, &out, &errb)
		help := out.String() + errb.String()
		var forms []string
		var flags []string
		for _, line := range strings.Split(help, "\n") {
			if m := flagLine.FindStringSubmatch(line); m != nil {
				flags = append(flags, m[1])
				continue
			}
			if len(flags) == 0 {
				forms = append(forms, line)
			}
		}
		usage := strings.Join(forms, "\n")
		for _, f := range flags {
			if !regexp.MustCompile(`(^|[ \[|])--?` + regexp.QuoteMeta(f) + `\b`).MatchString(usage) {
				t.Errorf("lockproof help %s: flag -%s is not in its usage lines:\n%s", name, f, usage)
			}
		}
		if regexp.MustCompile(`-worker\b`).MatchString(help) {
			t.Errorf("lockproof help %s shows the internal --worker flag", name)
		}
	}
}
