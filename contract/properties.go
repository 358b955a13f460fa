package contract

// Property IDs: the fields of a summary.json row, the keys of its
// expected verdicts, the runner's and the reports' names.
const (
	PropLease    = "lease"
	PropResource = "resource"
	PropLiveness = "liveness"
	PropClaims   = "claims"
	PropNotice   = "notice"
	PropFairness = "fairness"
	PropCalls    = "calls"
	// PropFootprint: the lock's keys stay within a bound of what is alive.
	PropFootprint = "footprint"
	// PropPromptness: a release hands the lock to the head of the line
	// within the bound the lock states.
	PropPromptness = "promptness"
)

// Property display names: check.json's "property", the check command's
// output and the reports' headings.
const (
	PropLeaseName      = "lease mutual exclusion"
	PropResourceName   = "resource safety"
	PropLivenessName   = "liveness"
	PropClaimsName     = "validity claims"
	PropNoticeName     = "loss notice"
	PropFairnessName   = "fair queue"
	PropCallsName      = "call contract"
	PropFootprintName  = "footprint"
	PropPromptnessName = "hand-off promptness"
)

// Property is one property the checker decides and every stage reports.
type Property struct {
	// ID is the short name (PropLease, ...); Name the display name
	// (PropLeaseName, ...); Guarantee the guarantee of docs/DESIGN.md it
	// checks; Letter its letter in the reports' matrix; Summary what it
	// says, in a few words, for the reports' legends.
	ID, Name, Guarantee, Letter, Summary string

	_ struct{} // fields by name only: the list may grow
}

// Properties lists the properties in summary order. Adding one is an
// entry here plus its check (package checker's checks); every stage reads
// this list: summary.json rows and check.json have one member per entry,
// keyed by its ID, and the predictions say ok for it until a profile or a
// lock says otherwise. An ID must not be the JSON name of a Row field.
func Properties() []Property {
	return []Property{
		{ID: PropLease, Name: PropLeaseName, Guarantee: "G1", Letter: "L", Summary: "one holder at a time"},
		{ID: PropResource, Name: PropResourceName, Guarantee: "G2", Letter: "R", Summary: "no stale write or read accepted"},
		// V: a lock that is never freed (G3).
		{ID: PropLiveness, Name: PropLivenessName, Guarantee: "G3", Letter: "V", Summary: "a lock nobody holds is granted"},
		// C: what the lock tells the code holding it (validity, loss
		// notice), the only guard a user without fencing has (G4).
		{ID: PropClaims, Name: PropClaimsName, Guarantee: "G4", Letter: "C", Summary: "the validity the lock tells its holder is true"},
		// N: a holder is told when its lease is gone (a watchdog's lock).
		{ID: PropNotice, Name: PropNoticeName, Guarantee: "G4", Letter: "N", Summary: "a holder is told, in time, that its lease is gone"},
		// F: whom a lock with a fair queue serves first (G3: a waiter
		// served behind everyone who came later waits without bound).
		{ID: PropFairness, Name: PropFairnessName, Guarantee: "G3", Letter: "F", Summary: "waiters are served in the order they joined"},
		// K: what a lock promises its caller about the calls themselves
		// (G5): each returns within its context, and a closed handle
		// grants nothing (a lease without the watchdog asked for).
		{ID: PropCalls, Name: PropCallsName, Guarantee: "G5", Letter: "K", Summary: "calls return within their context; a closed lock grants nothing"},
		// P: what the lock leaves in Redis (G6): its keys stay within a
		// bound of the holds, waiters and buried calls alive, during a
		// run and after it; a leak grows without one.
		{ID: PropFootprint, Name: PropFootprintName, Guarantee: "G6", Letter: "P", Summary: "the lock's keys stay within a bound of what is alive"},
		// H: how soon a release's hand-off reaches the head of the line
		// (G3): a lock that states a hand-off bound and serves its
		// waiters by their own polls passes waiter liveness, whose bound
		// covers a poll, and breaks this one.
		{ID: PropPromptness, Name: PropPromptnessName, Guarantee: "G3", Letter: "H", Summary: "a release hands the lock to the head of the line within the lock's bound"},
	}
}

// PropertyIDs are the IDs of Properties, in order.
func PropertyIDs() []string {
	var ids []string
	for _, p := range Properties() {
		ids = append(ids, p.ID)
	}
	return ids
}

// Verdict is the outcome of checking one property (or a whole history).
type Verdict string

// The verdicts of the summary.json and check.json contracts.
const (
	// OK: the property holds on the history.
	OK Verdict = "ok"
	// Violated: the history breaks the property.
	Violated Verdict = "violated"
	// Unknown: not decided (budget exhausted, cancelled, the run failed).
	// Never a pass.
	Unknown Verdict = "unknown"
	// NA: the history has nothing the property speaks about.
	NA Verdict = "n/a"
	// NotChecked: the row (or check.json) was written before the property
	// existed, so nothing judged it. Readers fill it in for a property a
	// file lacks; it is neither a pass nor a failure, never makes a row
	// inconclusive, and is never written: a row leaves the property out.
	NotChecked Verdict = "not checked"
)
