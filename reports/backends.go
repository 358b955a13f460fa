package reports

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockproof/lockproof/contract"
)

// WriteBackends renders runs (reps, read from dirs) of several topologies side by side, lock by
// lock (`lockproof report --backends DIR...`): Redis Sentinel, Redis
// Cluster, etcd and ZooKeeper, each lock a row under its topology, each
// fault a column (the faults of every run, in the order the runs give
// them), each cell what broke over its seeds ("—" where the fault did not
// run), marked when a verdict was not as predicted. It answers the design
// review's question, "is a lock on a consensus store safer than one on
// Redis, and under which faults?", from runs instead of belief.
func WriteBackends(w io.Writer, dirs []string, reps []*Report) error {
	b := bufio.NewWriter(w)
	var faults []string
	for _, r := range reps {
		for _, f := range r.Faults {
			if !slices.Contains(faults, f) {
				faults = append(faults, f)
			}
		}
	}
	fmt.Fprintf(b, "# lockproof: backends side by side\n\n")
	fmt.Fprintf(b, "Each cell names the properties that broke, in how many seeds (\"held\": every property held in every seed; \"—\": the fault does not run there). **(!)** marks a cell not as predicted; **(?)** one with an unknown verdict.\n\n")
	fmt.Fprintf(b, "| topology | lock | %s |\n|---|---|%s\n", strings.Join(faults, " | "), strings.Repeat("---|", len(faults)))
	for _, r := range reps {
		topo := contract.TopologyOf(r.Topology)
		for _, lock := range r.Locks {
			fmt.Fprintf(b, "| %s | %s |", topo, mdEscape(lock))
			for _, f := range faults {
				fmt.Fprintf(b, " %s |", backendCell(r.CellOf(lock, f)))
			}
			fmt.Fprintln(b)
		}
	}
	fmt.Fprintln(b)
	for i, r := range reps {
		fmt.Fprintf(b, "- %s (%s): %s\n", contract.TopologyOf(r.Topology), mdEscape(dirs[i]), mdEscape(r.Headline))
	}
	return b.Flush()
}

// backendCell is one lock × fault cell of WriteBackends, in Markdown.
func backendCell(c *CellReport) string {
	if c == nil {
		return "—"
	}
	var broke []string
	for _, p := range c.Properties {
		if p.Violated > 0 {
			broke = append(broke, fmt.Sprintf("%s %d/%d", p.Property, p.Violated, p.Decided()))
		}
	}
	s := "held"
	if len(broke) > 0 {
		s = mdEscape(strings.Join(broke, ", "))
	}
	switch c.Status {
	case Fail:
		s += " **(!)**"
	case Inconclusive:
		s += " **(?)**"
	}
	return s
}
