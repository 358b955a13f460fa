package contract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRowVerdictsAfterOps(t *testing.T) {
	r := Row{Lock: "fenced", Fault: FaultNone, Seed: 1, Ops: 7,
		Verdicts: Verdicts{PropLiveness: NA, PropLease: OK, PropResource: Violated},
		Expected: Verdicts{PropResource: Violated, PropLease: OK}, History: "h"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"lock":"fenced","fault":"none","seed":1,"ops":7,"lease":"ok","resource":"violated","liveness":"n/a","rejected":0,` +
		`"expected":{"lease":"ok","resource":"violated"},"history":"h",`
	if !strings.HasPrefix(string(b), want) {
		t.Fatalf("got %s\nwant it to start with %s", b, want)
	}
	var back Row
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: got %+v, want %+v", back, r)
	}
	if err := json.Unmarshal([]byte(`{"lock":"x","lease":3}`), &back); err == nil || !strings.Contains(err.Error(), PropLease) {
		t.Errorf("a verdict of the wrong type: err %v, want one naming %s", err, PropLease)
	}
}

// A property ID that is also a Row field's JSON name would write two
// members of one name.
func TestPropertyIDsAreNotRowFields(t *testing.T) {
	fields := map[string]bool{}
	var names func(reflect.Type)
	names = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && name == "":
				names(f.Type)
			case name != "" && name != "-":
				fields[name] = true
			}
		}
	}
	names(reflect.TypeOf(Row{}))
	if !fields["error"] || !fields["duration_ms"] {
		t.Fatalf("the field names were not all read: %v", fields)
	}
	for _, id := range PropertyIDs() {
		if _, ok := fields[id]; ok {
			t.Errorf("property ID %q is a Row field's JSON name", id)
		}
	}
}

func TestVerdictsOrder(t *testing.T) {
	b, err := json.Marshal(Verdicts{"zz": OK, PropLiveness: OK, "aa": NA, PropLease: Violated, PropResource: ""})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"lease":"violated","liveness":"ok","aa":"n/a","zz":"ok"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestConclusive(t *testing.T) {
	all := func(v Verdict) Verdicts { return Verdicts{PropLease: v, PropResource: OK, PropLiveness: NA} }
	for _, c := range []struct {
		name string
		row  Row
		want bool
	}{
		{"decided", Row{Verdicts: all(Violated)}, true},
		{"an unknown verdict", Row{Verdicts: all(Unknown)}, false},
		// A property added after the row was written decides nothing
		// either way (issue 28: properties can grow).
		{"a verdict the row predates", Row{Verdicts: Verdicts{PropLease: OK, PropResource: NA}}, true},
		{"a verdict read as not checked", Row{Verdicts: Verdicts{PropLease: OK, PropResource: OK, PropLiveness: NotChecked}}, true},
		{"no verdict at all", Row{Verdicts: Verdicts{PropLease: NotChecked}}, false},
		{"the scenario failed", Row{Verdicts: all(OK), Error: "boom"}, false},
		{"the fault failed", Row{Verdicts: all(OK), FaultError: "did not bite"}, false},
	} {
		if got := c.row.Conclusive(); got != c.want {
			t.Errorf("%s: Conclusive %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	if _, ok := Median[int64](nil); ok {
		t.Error("the median of nothing")
	}
	if m, _ := Median([]int64{900, 100, 500}); m != 500 {
		t.Errorf("median %d, want 500", m)
	}
	if m, _ := Median([]int64{400, 100}); m != 400 {
		t.Errorf("median of two %d, want the upper one, 400", m)
	}
}

// TestMismatchForms: a row's mismatches are kept in both forms, in order;
// an unexcused line names its property first; dropping one drops both.
func TestMismatchForms(t *testing.T) {
	var r Row
	r.AddMismatch(VerdictMismatch(PropLease, Violated, WantOK))
	r.AddMismatch(UnexcusedMismatch("claims violated outside every window that excuses it (claim-overlap, lines 3, 9; windows: failover at 1s)",
		func(p string) Want {
			if p != PropClaims {
				t.Errorf("asked the prediction of %q, want claims", p)
			}
			return WantMay
		}))
	if len(r.Mismatches) != 2 || r.Mismatches[0] != "lease violated, expected ok" {
		t.Fatalf("text %q", r.Mismatches)
	}
	if d := r.MismatchDetails[1]; d.Kind != MismatchUnexcused || d.Property != PropClaims || d.Verdict != Violated || d.Expected != WantMay || d.Text != r.Mismatches[1] {
		t.Errorf("unexcused detail %+v", d)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Row
	if err := json.Unmarshal(b, &back); err != nil || len(back.MismatchDetails) != 2 || back.MismatchDetails[0] != r.MismatchDetails[0] {
		t.Errorf("round trip: %v, %+v", err, back.MismatchDetails)
	}
	if !r.DropMismatch("lease violated, expected ok") || len(r.Mismatches) != 1 || len(r.MismatchDetails) != 1 || r.MismatchDetails[0].Property != PropClaims {
		t.Errorf("after the drop: %q, %+v", r.Mismatches, r.MismatchDetails)
	}
	if r.DropMismatch("nothing") {
		t.Error("dropped a mismatch the row does not have")
	}
}

// TestMismatchOf: a mismatch's line reads back as the judge wrote it, so
// that a file written before mismatch_details says which property each
// line is about (Row.Details).
func TestMismatchOf(t *testing.T) {
	for _, m := range []Mismatch{
		VerdictMismatch(PropLease, Violated, WantOK),
		VerdictMismatch(PropResource, OK, WantViolated),
		{Kind: MismatchUnexcused, Property: PropLease, Verdict: Violated,
			Text: "lease violated outside every window that excuses it (mutual-exclusion, lines 1,2; windows: key-loss)"},
		{Kind: MismatchTrace, Text: "trace rejected by the model at line 5"},
		{Kind: MismatchNoBite, Text: "rejected 0, expected > 0 (the fault did not bite)"},
	} {
		if got := MismatchOf(m.Text); got != m {
			t.Errorf("MismatchOf(%q) = %+v; want %+v", m.Text, got, m)
		}
	}
	r := Row{Mismatches: []string{"lease violated, expected ok", "rejected 0, expected > 0 (the fault did not bite)"}}
	if d := r.Details(); len(d) != 2 || d[0].Property != PropLease || d[1].Kind != MismatchNoBite {
		t.Errorf("Details of an older row: %+v", d)
	}
}

func TestTraitsHas(t *testing.T) {
	skew, _ := Traits(FaultFailoverSkew)
	for _, c := range []struct {
		key  FaultTraits
		want bool
	}{
		{FaultTraits{}, true},
		{FaultTraits{FailsOver: true}, true},
		{FaultTraits{FailsOver: true, SkewsPromoted: true}, true},
		{FaultTraits{FailsOver: true, Forgets: true}, false},
		{FaultTraits{Like: FaultFailover}, false},
	} {
		if got := skew.Has(c.key); got != c.want {
			t.Errorf("failover-skew's traits Has(%+v) = %v, want %v", c.key, got, c.want)
		}
	}
}
