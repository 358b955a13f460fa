package checker

import (
	"context"
	"fmt"
	"io"

	"github.com/anishathalye/porcupine"

	"github.com/lockproof/lockproof/history"
)

// Visualize writes Porcupine's HTML visualization of a history to w: one
// partition per key for its lease ops and one for its resource ops, with the
// model state after each linearized op. Fault windows are shown as
// annotations spanning their window (tag "faults"); ops that had no effect
// and are not part of the models (fail, rejected, unknown reads) are shown as
// grey annotations on their client's row. The search is bounded by
// opts.Timeout (a partial linearization is drawn when it runs out). Errors:
// invalid options or ops, as Check; write errors.
func Visualize(ctx context.Context, w io.Writer, ops []history.Op, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	p, err := prepare(ops, opts.Drift)
	if err != nil {
		return fmt.Errorf("visualize history: %w", err)
	}
	model := newModel(ctx, p)
	var all []porcupine.Operation
	var parts [][]porcupine.Operation
	for _, k := range p.keys {
		for _, part := range [][]*lop{k.lease, k.resource} {
			if pops := porcupineOps(part); len(pops) > 0 {
				all = append(all, pops...)
				parts = append(parts, pops)
			}
		}
	}
	// Partition returns the precomputed partitions; it ignores its argument,
	// which is exactly all.
	model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return parts }
	_, info := porcupine.CheckOperationsVerbose(model, all, opts.Timeout)

	end := int64(0)
	for i := range ops {
		end = max(end, ops[i].Call)
		if ops[i].Completed {
			end = max(end, ops[i].Return)
		}
	}
	var ann []porcupine.Annotation
	for _, fi := range p.faults {
		f := &ops[fi]
		e := end
		if f.Completed {
			e = f.Return
		}
		ann = append(ann, porcupine.Annotation{Tag: "faults", Start: f.Call, End: e,
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
				ann = append(ann, porcupine.Annotation{ClientId: int(o.client) - 1, Start: o.call, End: e,
					Description: string(o.kind) + " → " + string(o.src.Result),
					Details:     p.describe(o) + " on key " + k.key + ": no effect, not in the model",
					TextColor:   "#555", BackgroundColor: "#e9ecef"})
			}
		}
	}
	info.AddAnnotations(ann)
	if err := porcupine.Visualize(model, info, w); err != nil {
		return fmt.Errorf("write visualization: %w", err)
	}
	return nil
}
