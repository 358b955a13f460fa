package checker

import (
	"encoding/json"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/internal/jsonobj"
)

// Rule names a violated rule within a property (Violation.Rule).
const (
	// Lease rules.
	RuleMutualExclusion = "mutual-exclusion" // an acquire succeeded while another lease was surely valid
	RuleNotOwner        = "not-owner"        // a release or renew succeeded for a non-owner, a wrong token or an expired lease
	RuleTokenOrder      = "token-order"      // ok-acquire tokens did not strictly increase
	RuleTokenOwner      = "token-owner"      // one token served two clients
	RuleInspectFree     = "inspect-free"     // the lock said a key free, or held by another, while a hold was surely live
	RuleInspectHolder   = "inspect-holder"   // the lock named a holder (or its fence) that could not hold the key then
	RuleHoldCount       = "hold-count"       // the lock counted a client's holds outside what the history allows
	RuleRWExclusion     = "rw-exclusion"     // a write hold was surely held while another client's hold was
	RulePermits         = "permits"          // more permits were surely held at once than the semaphore's capacity
	// Resource rules.
	RuleFencing     = "fencing-order" // an accepted fenced op carried a token below one accepted before it
	RuleLostUpdate  = "lost-update"   // a write's prev was no longer the resource's value
	RuleStaleRead   = "stale-read"    // a read did not return the last accepted write's value
	RuleStaleHolder = "stale-holder"  // an unfenced op was accepted from a holder whose lease had passed to another client
	// Liveness rule.
	RuleLiveness       = "liveness"        // an acquire failed after a crashed holder's lease had surely expired
	RuleWaiterLiveness = "waiter-liveness" // a waiter got the lock (or gave up) later than the lock's bound after it was surely free
	// Claims rules (what the lock told its holder).
	RuleClaimOverlap  = "claim-overlap"  // another client's lease took effect while a holder's claimed validity ran
	RuleLossNotice    = "loss-notice"    // a live holder was not told within the lock's bound that another client took its key
	RuleFalseNotice   = "false-notice"   // a lease was reported lost after its release had succeeded
	RuleReleasedClaim = "released-claim" // the lock's server said a lease was still valid after its release had succeeded
	// Fairness rule.
	RuleOvertaken    = "overtaken"     // a waiter was overtaken by more waiters that joined after it than the lock allows
	RuleCheckedWrite = "checked-write" // a write made after a check that found the lease valid overlapped another holder's lease
	// Calls rules (what the lock promises its caller about the calls).
	RuleLateReturn  = "late-return"  // a call returned later than its context's deadline plus the lock's slack
	RuleClosedGrant = "closed-grant" // an acquire called after its client's close returned, or a wait returned after it, got the lock
	// Footprint rule (what the lock keeps in Redis).
	RuleFootprintBound = "footprint-bound" // the lock kept more records for a key than its bound allows for what was alive
	// Promptness rule (how soon a release's hand-off is picked up).
	RuleHandoffLate = "handoff-late" // a release freed the lock with waiters in line, and none was granted within the lock's hand-off bound
	// RuleLinearizability: no order of a key's ops satisfies the model, and
	// the explanation could not single out the op at fault (e.g. it timed out).
	RuleLinearizability = "linearizability"
)

// MaxViolations bounds the violations listed per property; ViolationCount has the total.
const MaxViolations = 100

// MaxUndecided bounds the undecided keys listed per property;
// UndecidedCount has the total.
const MaxUndecided = 100

// Result is the outcome of Check. It is serialised as check.json by the run
// and report commands; its JSON form is a stable contract:
//
//	{"verdict":"violated",
//	 "lease":{"property":"lease mutual exclusion","verdict":"violated","violation_count":1,
//	          "violations":[{"property":"lease mutual exclusion","rule":"mutual-exclusion","key":"cart",
//	                         "lines":[1,2],"explanation":"...","ops":[{"line":1,"client":"a",...}]}]},
//	 "resource":{...},"liveness":{...},
//	 "counts":{"ops":2,"keys":1,"lease_ops":2,"resource_ops":0,"rejected":0,"faults":0},
//	 "options":{"drift":0.01,"liveness_slack_ms":1000,"timeout_ms":0}}
//
// Each property of contract.Properties is a member keyed by its ID, after
// "verdict" and in that order (Props).
type Result struct {
	Verdict contract.Verdict `json:"verdict"`
	// Props holds the result of each property of contract.Properties, in
	// that order; Of finds one by ID.
	Props   []PropertyResult `json:"-"`
	Counts  Counts           `json:"counts"`
	Options OptionsUsed      `json:"options"`
}

// PropertyResult is the verdict on one property with its evidence.
type PropertyResult struct {
	// ID is the property's contract ID (contract.PropLease, ...): its key
	// in check.json; Property its display name.
	ID       string           `json:"-"`
	Property string           `json:"property"`
	Verdict  contract.Verdict `json:"verdict"`
	// Explanation sums the verdict up in one sentence.
	Explanation string `json:"explanation,omitempty"`
	// ViolationCount is the number of violations found; Violations lists at most MaxViolations of them.
	ViolationCount int         `json:"violation_count,omitempty"`
	Violations     []Violation `json:"violations,omitempty"`
	// UndecidedCount is the number of keys whose check did not finish
	// (the budget ran out, the context was cancelled); Undecided lists at
	// most MaxUndecided of them, the first in key order.
	UndecidedCount int         `json:"undecided_count,omitempty"`
	Undecided      []Undecided `json:"undecided,omitempty"`
	// StallLines are the history lines of the stalls (contract.FaultStall
	// windows) that alone excused what this property's check would have
	// found (a late waiter, an overtaken one, a late return...), and
	// StallExcusedMs the longest of them: the verdict holds because a
	// process of the harness's did not run then (docs/DESIGN.md, "Stalls").
	StallLines     []int `json:"stall_lines,omitempty"`
	StallExcusedMs int64 `json:"stall_excused_ms,omitempty"`
}

// Undecided says which key's check could not finish, and why.
type Undecided struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// Violation is one breach of a property, with the ops that show it.
type Violation struct {
	Property string `json:"property"`
	Rule     string `json:"rule"`
	Key      string `json:"key"`
	// Lines are the history lines of Ops, ascending.
	Lines       []int   `json:"lines"`
	Explanation string  `json:"explanation"`
	Ops         []OpRef `json:"ops"`
}

// OpRef is an operation of the history, as shown in a violation.
type OpRef struct {
	// Line is the op's history line (history.Op.Line), or its 1-based index in
	// the checked slice when the op was not read from a file.
	Line   int     `json:"line"`
	Client string  `json:"client"`
	Op     string  `json:"op"`
	Key    string  `json:"key"`
	Call   int64   `json:"call"`
	Return *int64  `json:"return,omitempty"`
	Result string  `json:"result"`
	TTLMs  int64   `json:"ttl_ms,omitempty"`
	Token  *uint64 `json:"token,omitempty"`
	Value  *string `json:"value,omitempty"`
	Prev   *string `json:"prev,omitempty"`
}

// Counts describe the checked history.
type Counts struct {
	Ops         int `json:"ops"`          // every line, faults included
	Keys        int `json:"keys"`         // distinct keys
	LeaseOps    int `json:"lease_ops"`    // acquire, release, renew
	ResourceOps int `json:"resource_ops"` // write, read
	Rejected    int `json:"rejected"`     // resource ops refused (result rejected)
	Faults      int `json:"faults"`       // fault windows
}

// OptionsUsed records the options a Result was computed with.
type OptionsUsed struct {
	Drift           float64 `json:"drift"`
	LivenessSlackMs int64   `json:"liveness_slack_ms"`
	TimeoutMs       int64   `json:"timeout_ms"`
	// WaitBoundMs is Options.WaitBound (0: the waiter-liveness rule was off).
	WaitBoundMs int64 `json:"wait_bound_ms,omitempty"`
	// LossBoundMs is Options.LossBound (0: the loss-notice rule was off).
	LossBoundMs int64 `json:"loss_bound_ms,omitempty"`
	// Fair and Bypass are Options.Fair and Options.Bypass (Fair false:
	// the fairness property was n/a).
	Fair   bool `json:"fair,omitempty"`
	Bypass int  `json:"bypass,omitempty"`
	// CallSlackMs is Options.CallSlack (0: the late-return rule was off);
	// CloseRefuses is Options.CloseRefuses (false: the closed-grant rule
	// was off).
	CallSlackMs  int64 `json:"call_slack_ms,omitempty"`
	CloseRefuses bool  `json:"close_refuses,omitempty"`
	// Footprint is Options.Footprint (absent: the footprint property
	// was n/a).
	Footprint *FootprintUsed `json:"footprint,omitempty"`
	// HandoffMs is Options.Handoff (0: the promptness property was n/a).
	HandoffMs int64 `json:"handoff_ms,omitempty"`
	// NotReentrant is Options.NotReentrant: the lease model took an ok
	// acquire by a client that may still hold for a second holder, not a
	// nested hold. A check of the same history must be told it again
	// (check --not-reentrant) to decide as this one did.
	NotReentrant bool `json:"not_reentrant,omitempty"`
}

// Of returns the result of the property whose contract ID is id
// (contract.PropLease, ...), or nil when the result (or r) has none.
func (r *Result) Of(id string) *PropertyResult {
	if r == nil {
		return nil
	}
	for i := range r.Props {
		if r.Props[i].ID == id {
			return &r.Props[i]
		}
	}
	return nil
}

// resultFields is Result without its methods, for encoding/json.
type resultFields Result

// MarshalJSON writes the result with one member per property after "verdict".
func (r Result) MarshalJSON() ([]byte, error) {
	ms := make([]jsonobj.Member, len(r.Props))
	for i, pr := range r.Props {
		ms[i] = jsonobj.Member{Key: pr.ID, Value: pr}
	}
	return jsonobj.Marshal(resultFields(r), "verdict", ms)
}

// UnmarshalJSON reads a result with the members of the properties of
// contract.Properties it has (a file without one leaves it out of Props).
func (r *Result) UnmarshalJSON(b []byte) error {
	var f resultFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	err := jsonobj.Each(b, contract.PropertyIDs(), func(id string, m json.RawMessage) error {
		pr := PropertyResult{ID: id}
		err := json.Unmarshal(m, &pr)
		f.Props = append(f.Props, pr)
		return err
	})
	*r = Result(f)
	return err
}

// combine returns the overall verdict: violated if any property is violated,
// else unknown if any is unknown, else ok (n/a counts as ok).
func combine(ps ...contract.Verdict) contract.Verdict {
	v := contract.OK
	for _, p := range ps {
		switch p {
		case contract.Violated:
			return contract.Violated
		case contract.Unknown:
			v = contract.Unknown
		}
	}
	return v
}

func refOf(o *history.Op, idx int) OpRef {
	r := OpRef{
		Line:   lineOf(o, idx),
		Client: o.Client,
		Op:     string(o.Kind),
		Key:    o.Key,
		Call:   o.Call,
		Result: string(o.Result),
		TTLMs:  o.TTLMillis,
	}
	if o.Completed {
		ret := o.Return
		r.Return = &ret
	}
	if o.HasToken {
		t := o.Token
		r.Token = &t
	}
	if o.HasValue {
		v := o.Value
		r.Value = &v
	}
	if o.HasPrev {
		p := o.Prev
		r.Prev = &p
	}
	return r
}

func lineOf(o *history.Op, idx int) int {
	if o.Line > 0 {
		return o.Line
	}
	return idx + 1
}
