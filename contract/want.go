package contract

// Want is what the guarantees predict for one property of one scenario:
// summary.json's cells[].want, the report's "predicted".
type Want string

// The predictions.
const (
	// WantOK: the property holds in every run.
	WantOK Want = "ok"
	// WantViolated: the property breaks in (nearly) every run: the fault is
	// scheduled so that it bites, and a run that shows no violation means the
	// harness missed what this lock is known to break.
	WantViolated Want = "violated"
	// WantMay: the literature says the property can break under this fault,
	// and it does in some seeds, not in every run (e.g. a failover loses the
	// lock only when a lease was taken in the replication gap). One run may
	// give any verdict; over several seeds at least one should show it.
	WantMay Want = "may"
	// WantAny: no prediction (the literature does not say, or the outcome
	// depends on timing the harness does not control).
	WantAny Want = "any"
)

// Matches reports whether verdict v of one run agrees with the prediction.
// Only the line between violated and not violated matters (n/a meets ok);
// an unknown verdict never matches.
func (w Want) Matches(v Verdict) bool {
	switch {
	case v == Unknown:
		return false
	case w == WantMay || w == WantAny || w == "":
		return true
	case w == WantViolated:
		return v == Violated
	default:
		return v != Violated
	}
}

// Verdict is the prediction as a summary.json expected verdict: "ok",
// "violated", or "" (no per-run expectation) for may and any.
func (w Want) Verdict() Verdict {
	switch w {
	case WantOK:
		return OK
	case WantViolated:
		return Violated
	}
	return ""
}

// WantOf is the prediction a summary row states for a property: its
// expected verdict e, or may when the row lists the property in
// may_violate, or "" (none).
func WantOf(e Verdict, may bool) Want {
	switch {
	case e == Violated:
		return WantViolated
	case e != "":
		return WantOK
	case may:
		return WantMay
	}
	return ""
}
