package checker

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// MaxDrawnOps bounds the ops Visualize draws with Porcupine: partitions are
// drawn whole, in order (violated ones first), until the next would pass
// the bound; the others are listed as not drawn. Porcupine's page holds
// every op and state, and its search grows with a partition's length, so an
// unbounded page of a 1M-op history would neither render nor finish.
const MaxDrawnOps = 20_000

// Visualize writes an HTML page of a history checked with Check: first the
// verdict and the explanation of each property, then Porcupine's
// visualization. Each drawn partition (a key's lease ops, or its resource
// ops) is labelled by a tag row naming its key and kind; the model state is
// shown after each linearized op. Fault windows are a tag row; ops that had
// no effect and are not part of the models (fail, rejected, unknown reads)
// are grey annotations on their client's row; every op that a violation
// cites, whichever rule found it, is a red annotation carrying the
// violation's explanation.
//
// res is the result of Check on ops with opts; nil: Visualize checks them.
// The drawing search is bounded by what remains of opts.Timeout (a partial
// linearization is drawn when it runs out), and by MaxDrawnOps. Errors:
// invalid options or ops, as Check; write errors.
func Visualize(ctx context.Context, w io.Writer, ops []history.Op, res *Result, opts Options) error {
	start := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if res == nil {
		if res, err = Check(ctx, ops, opts); err != nil {
			return fmt.Errorf("visualize history: %w", err)
		}
	}
	p, err := prepare(ops, opts.Drift)
	if err != nil {
		return fmt.Errorf("visualize history: %w", err)
	}
	model := newModel(ctx, p)

	type part struct {
		key, kind string
		pops      []porcupine.Operation
		violated  bool
	}
	violatedKey := map[string]map[string]bool{} // property -> key
	for _, pr := range res.Props {
		violatedKey[pr.Property] = map[string]bool{}
		for _, v := range pr.Violations {
			violatedKey[pr.Property][v.Key] = true
		}
	}
	var parts []part
	for _, k := range p.keys {
		if pops := porcupineOps(k.lease); len(pops) > 0 {
			parts = append(parts, part{k.key, "lease ops", pops, violatedKey[contract.PropLeaseName][k.key] || violatedKey[contract.PropLivenessName][k.key]})
		}
		if pops := porcupineOps(k.resource); len(pops) > 0 {
			parts = append(parts, part{k.key, "resource ops", pops, violatedKey[contract.PropResourceName][k.key]})
		}
	}
	// Violated partitions first, then in key order, within the bound.
	var drawn []part
	var skipped []string
	n := 0
	for _, violated := range []bool{true, false} {
		for _, pt := range parts {
			if pt.violated != violated {
				continue
			}
			if n+len(pt.pops) > MaxDrawnOps {
				skipped = append(skipped, fmt.Sprintf("key %q %s (%d ops)", pt.key, pt.kind, len(pt.pops)))
				continue
			}
			n += len(pt.pops)
			drawn = append(drawn, pt)
		}
	}
	var all []porcupine.Operation
	var groups [][]porcupine.Operation
	for _, pt := range drawn {
		all = append(all, pt.pops...)
		groups = append(groups, pt.pops)
	}
	// Partition returns the precomputed partitions; it ignores its argument,
	// which is exactly all.
	model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return groups }
	var timeout time.Duration
	if opts.Timeout > 0 {
		if timeout = opts.Timeout - time.Since(start); timeout <= 0 {
			timeout = time.Millisecond
		}
	}
	_, info := porcupine.CheckOperationsVerbose(model, all, timeout)

	end := int64(0)
	for i := range ops {
		end = max(end, ops[i].Call)
		if ops[i].Completed {
			end = max(end, ops[i].Return)
		}
	}
	var ann []porcupine.Annotation
	for i, pt := range drawn {
		first, last := pt.pops[0].Call, pt.pops[0].Return
		for _, po := range pt.pops {
			last = max(last, min(po.Return, pCall(end)))
		}
		ann = append(ann, porcupine.Annotation{Tag: partitionTag(i, pt.key, pt.kind), Start: first, End: last,
			Description: fmt.Sprintf("key %q: %s", pt.key, pt.kind),
			Details:     fmt.Sprintf("partition %d: %d ops of key %q (%s)", i+1, len(pt.pops), pt.key, pt.kind)})
	}
	for _, fi := range p.faults {
		f := &ops[fi]
		e := end
		if f.Completed {
			e = f.Return
		}
		ann = append(ann, porcupine.Annotation{Tag: "faults", Start: pTime(f.Call), End: pTime(e),
			Description: f.Name, Details: fmt.Sprintf("fault %q (line %d)", f.Name, lineOf(f, fi)),
			BackgroundColor: "#f8d7da"})
	}
	for _, k := range p.keys {
		for _, part := range [][]*lop{k.lease, k.resource} {
			for _, o := range part {
				if checked(o) {
					continue
				}
				e := o.ret
				if e == inf {
					e = end
				}
				ann = append(ann, porcupine.Annotation{ClientId: int(o.client) - 1, Start: pTime(o.call), End: pTime(e),
					Description: string(o.kind) + " → " + string(o.src.Result),
					Details:     p.describe(o) + " on key " + k.key + ": no effect, not in the model",
					TextColor:   "#555", BackgroundColor: "#e9ecef"})
			}
		}
	}
	ann = append(ann, violationAnnotations(p, res, end)...)
	info.AddAnnotations(ann)

	var page bytes.Buffer
	if err := porcupine.Visualize(model, info, &page); err != nil {
		return fmt.Errorf("write visualization: %w", err)
	}
	out := page.String()
	labels := make([]drawnLabel, len(drawn))
	for i, pt := range drawn {
		labels[i] = drawnLabel{pt.key, pt.kind, len(pt.pops)}
	}
	header := visualHeader(res, labels, skipped)
	if i := strings.Index(out, "<body>"); i >= 0 {
		out = out[:i+len("<body>")] + header + out[i+len("<body>"):]
	} else {
		out = header + out
	}
	if _, err := io.WriteString(w, out); err != nil {
		return fmt.Errorf("write visualization: %w", err)
	}
	return nil
}

func partitionTag(i int, key, kind string) string {
	return fmt.Sprintf("partition %d: key %q, %s", i+1, key, kind)
}

type drawnLabel struct {
	key, kind string
	ops       int
}

// violationAnnotations marks every op a listed violation cites, on its
// client's row, with the rule and the explanation; ops cited by several
// violations get one annotation each.
func violationAnnotations(p *prepared, res *Result, end int64) []porcupine.Annotation {
	clientID := map[string]int{}
	for i, c := range p.clients {
		clientID[c] = i
	}
	var ann []porcupine.Annotation
	for _, pr := range res.Props {
		for _, v := range pr.Violations {
			for _, o := range v.Ops {
				e := end
				if o.Return != nil {
					e = *o.Return
				}
				ann = append(ann, porcupine.Annotation{ClientId: clientID[o.Client] - 1, Start: pTime(o.Call), End: pTime(e),
					Description: fmt.Sprintf("✗ %s (line %d)", v.Rule, o.Line),
					Details: fmt.Sprintf("%s violated, rule %s, key %q, lines %s: %s",
						v.Property, v.Rule, v.Key, joinLines(v.Lines), v.Explanation),
					TextColor: "#fff", BackgroundColor: "#c0392b"})
			}
		}
	}
	return ann
}

// visualHeader renders the verdict, each property's explanation, the
// violations listed, and the legend of partitions drawn and not drawn.
func visualHeader(res *Result, drawn []drawnLabel, skipped []string) string {
	var b strings.Builder
	color := map[contract.Verdict]string{contract.OK: "#1e7e34", contract.Violated: "#c0392b", contract.Unknown: "#b8860b", contract.NA: "#555"}
	fmt.Fprintf(&b, `<section id="lockproof-verdict" style="font-family:sans-serif;margin:3em 1em 1em 1em;padding:1em;border:2px solid %s">`, color[res.Verdict])
	fmt.Fprintf(&b, `<h1 style="margin-top:0">Verdict: <span style="color:%s">%s</span> <small>(%d ops, %d keys)</small></h1><ul>`,
		color[res.Verdict], html.EscapeString(string(res.Verdict)), res.Counts.Ops, res.Counts.Keys)
	for _, pr := range res.Props {
		fmt.Fprintf(&b, `<li><b>%s</b>: <span style="color:%s">%s</span>: %s`, html.EscapeString(pr.Property),
			color[pr.Verdict], html.EscapeString(string(pr.Verdict)), html.EscapeString(pr.Explanation))
		if len(pr.Violations) > 0 {
			b.WriteString("<ol>")
			for _, v := range pr.Violations {
				fmt.Fprintf(&b, "<li>rule <code>%s</code>, key %s, lines %s: %s</li>", html.EscapeString(v.Rule),
					html.EscapeString(fmt.Sprintf("%q", v.Key)), joinLines(v.Lines), html.EscapeString(v.Explanation))
			}
			b.WriteString("</ol>")
		}
		b.WriteString("</li>")
	}
	b.WriteString("</ul><p>Partitions drawn below (their ops share the client rows; each has a tag row naming it, spanning its ops):</p><ol>")
	for _, d := range drawn {
		fmt.Fprintf(&b, "<li>key %s: %s (%d ops)</li>", html.EscapeString(fmt.Sprintf("%q", d.key)), html.EscapeString(d.kind), d.ops)
	}
	b.WriteString("</ol>")
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "<p>Not drawn (the page draws at most %d ops; violated partitions first): %s</p>",
			MaxDrawnOps, html.EscapeString(strings.Join(skipped, "; ")))
	}
	b.WriteString(`<p>Red annotations mark the ops each violation cites; grey ones had no effect and are not in the model.</p></section>`)
	return b.String()
}
