// Command lockproof runs locks under faults, checks recorded histories and
// renders safety reports.
//
//	lockproof run    --out DIR     run the lock × fault matrix (--topology cluster: on a Redis Cluster)
//	lockproof check  FILE          check one history (exit 0 ok, 1 violated, 2 bad input, 3 unknown)
//	lockproof report DIR           render the report of a finished run
//	lockproof sim    --seeds 1-1000 run locks in virtual time, seed by seed
//	lockproof mutants              the harness's mutation score: each mutant of lock/ and fencing/ through sim and run
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/zoo"
)

// Exit codes shared by every subcommand (docs/DESIGN.md lists them).
const (
	exitOK          = contract.ExitOK
	exitViolation   = contract.ExitViolation
	exitBadInput    = contract.ExitBadInput
	exitUnknown     = contract.ExitUnknown
	exitEnvironment = contract.ExitEnvironment
	exitInterrupted = contract.ExitInterrupted
)

// command is one subcommand: it parses its own flags from args and returns the exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands. Each lives in a file of its own (check.go, ...).
func commands() map[string]command {
	return map[string]command{
		"check":   checkCommand(),
		"mutants": mutantsCommand(),
		"report":  reportCommand(),
		"run":     runCommand(),
		"sim":     simCommand(),
		"trace":   traceCommand(),
	}
}

func main() {
	// A child-process client of pause-process is this binary again: it runs
	// here and exits (without this, the child was handed to the command
	// parser, which refused its arguments, and the fault never ran).
	workload.MaybeChild(zoo.Builtin())
	// Toxiproxy's bandwidth toxic logs each transfer it interrupts at trace
	// level through zerolog's process-wide logger (hundreds of lines a
	// scenario); this program's output is its progress lines.
	zerolog.SetGlobalLevel(zerolog.InfoLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) >= 2 && args[0] == "help" {
		c, ok := cmds[args[1]]
		if !ok || len(args) > 2 {
			// As lockproof bogus is refused: a typo in a script's
			// help call must not pass as success.
			fmt.Fprintf(stderr, "lockproof help: unknown command %q%s (lockproof help lists the commands)\n", strings.Join(args[1:], " "), didYouMean(args[1], cmds))
			return exitBadInput
		}
		c.run(ctx, []string{"-h"}, stdout, stderr) // prints the command's usage and flags
		return exitOK
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "version") {
		fmt.Fprintln(stdout, version())
		return exitOK
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return exitBadInput
		}
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "lockproof: unknown command %q%s\n", args[0], didYouMean(args[0], cmds))
		usage(stderr, cmds)
		return exitBadInput
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// version says which build this is: the module version (for go install
// ...@version) and the VCS revision it was built from, when recorded.
func version() string {
	v, rev, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "lockproof " + v
	if rev != "" {
		out += " " + rev
		if dirty {
			out += "+dirty"
		}
	}
	return out + " " + runtime.Version()
}

// didYouMean is ": did you mean NAME?" for the command nearest typed, or "".
func didYouMean(typed string, cmds map[string]command) string {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	if n := nearest(typed, names); n != "" {
		return fmt.Sprintf(": did you mean %s?", n)
	}
	return ""
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: lockproof <command> [flags]   (lockproof help <command>: its flags; lockproof --version)")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
}
