package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockproof/lockproof/contract"
)

// noteStall records on pr that the stall op at index i excused
// something of its property.
func (c *run) noteStall(pr *PropertyResult, i int) {
	o := &c.p.ops[i]
	if !o.Completed {
		return // a stall is recorded once over: never open
	}
	line := o.Line
	if line == 0 {
		line = i + 1
	}
	if !slices.Contains(pr.StallLines, line) {
		pr.StallLines = append(pr.StallLines, line)
	}
	pr.StallExcusedMs = max(pr.StallExcusedMs, time.Duration(o.Return-o.Call).Milliseconds())
}

// fold merges one key's findings on a property into the property's result.
func fold(pr *PropertyResult, key string, f finding) {
	v, undecided, vs, present := f.verdict, f.undecided, dedupe(f.violations), f.verdict != contract.NA
	pr.ViolationCount += len(vs)
	for _, x := range vs {
		if len(pr.Violations) < MaxViolations {
			pr.Violations = append(pr.Violations, x)
		}
	}
	if undecided != "" {
		// Listed up to MaxUndecided, counted all: a budget spent early on
		// a history of a million keys leaves every key undecided.
		pr.UndecidedCount++
		if len(pr.Undecided) < MaxUndecided {
			pr.Undecided = append(pr.Undecided, Undecided{Key: key, Reason: undecided})
		}
	}
	switch {
	case len(vs) > 0 || v == contract.Violated:
		pr.Verdict = contract.Violated
	case v == contract.Unknown:
		if pr.Verdict != contract.Violated {
			pr.Verdict = contract.Unknown
		}
	case present && pr.Verdict == contract.NA:
		pr.Verdict = contract.OK
	}
}

// finish sorts a property's violations and writes its explanation.
func finish(pr *PropertyResult) {
	sort.SliceStable(pr.Violations, func(i, j int) bool {
		a, b := pr.Violations[i].Lines, pr.Violations[j].Lines
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	switch pr.Verdict {
	case contract.Violated:
		v := pr.Violations[0]
		pr.Explanation = fmt.Sprintf("%d violation(s); first: lines %s: %s", pr.ViolationCount, joinLines(v.Lines), v.Explanation)
	case contract.Unknown:
		var ks []string
		for _, u := range pr.Undecided {
			ks = append(ks, fmt.Sprintf("key %q: %s", u.Key, u.Reason))
		}
		pr.Explanation = "undecided: " + strings.Join(ks, "; ")
		if more := pr.UndecidedCount - len(pr.Undecided); more > 0 {
			pr.Explanation += fmt.Sprintf("; and %d more keys", more)
		}
	case contract.OK:
		pr.Explanation = "holds on every key"
	case contract.NA:
		pr.Explanation = "nothing to check"
	}
}

func joinLines(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, ",")
}

func dedupe(vs []Violation) []Violation {
	if len(vs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	out := vs[:0:0]
	for _, v := range vs {
		k := v.Rule + ":" + joinLines(v.Lines)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}
