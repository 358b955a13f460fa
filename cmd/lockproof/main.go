// Command lockproof runs locks under faults, checks recorded histories and
// renders safety reports.
//
//	lockproof run    --out DIR     run the lock × fault matrix
//	lockproof check  FILE          check one history (exit 0 ok, 1 violated, 2 bad input, 3 unknown)
//	lockproof report DIR           render the report of a finished run
package main

import (
	"context"
	"fmt"
	"github.com/lockproof/lockproof/chaos/workload"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand (the check contract in DESIGN.md).
const (
	exitOK        = 0
	exitViolation = 1
	exitBadInput  = 2
	exitUnknown   = 3
)

// command is one subcommand: it parses its own flags from args and returns the exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands. Each lives in a file of its own (check.go, ...).
func commands() map[string]command {
	return map[string]command{
		"check":  checkCommand(),
		"report": reportCommand(),
		"run":    runCommand(),
		"trace":  traceCommand(),
	}
}

func main() {
	// A child-process client of pause-process is this binary again: it runs
	// here and exits (without this, the child was handed to the command
	// parser, which refused its arguments, and the fault never ran).
	workload.MaybeChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return exitBadInput
		}
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "lockproof: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return exitBadInput
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: lockproof <command> [flags]")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
}
