package checker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

// TestLargeClocks: a history near the end of the time range the reader
// accepts (history.MaxTime) is judged as the same history at 0: each of
// these violations was a silent pass at times near 2^62 before the range
// was bounded (issue 27).
func TestLargeClocks(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		prop       string
		ops        string
	}{
		{"stale read", RuleStaleRead, contract.PropResource, `
{"client":"a","op":"acquire","key":"k","call":0,"return":1000000,"result":"ok","ttl_ms":1000,"token":1}
{"client":"a","op":"write","key":"k","call":2000000,"return":3000000,"result":"ok","token":1,"value":"x"}
{"client":"a","op":"read","key":"k","call":4000000,"return":5000000,"result":"ok","token":1,"value":""}`},
		{"fenced write whose token goes back", RuleFencing, contract.PropResource, `
{"client":"a","op":"write","key":"k","call":0,"return":1000000,"result":"ok","token":2,"value":"x"}
{"client":"a","op":"write","key":"k","call":2000000,"return":3000000,"result":"ok","token":1,"value":"y"}`},
		{"release after the lease surely expired", RuleNotOwner, contract.PropLease, `
{"client":"a","op":"acquire","key":"k","call":0,"return":1000000,"result":"ok","ttl_ms":100}
{"client":"a","op":"release","key":"k","call":300000000,"return":301000000,"result":"ok"}`},
		{"waiter giving up late", RuleWaiterLiveness, contract.PropLiveness, `
{"client":"a","op":"acquire","key":"k","call":0,"return":1000000,"result":"ok","ttl_ms":100}
{"client":"a","op":"release","key":"k","call":10000000,"return":11000000,"result":"ok"}
{"client":"b","op":"acquire","key":"k","call":5000000,"return":500000000,"result":"fail","ttl_ms":100,"wait":true}`},
	} {
		ops, err := history.ReadAll(strings.NewReader(strings.TrimSpace(tc.ops)), tc.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, base := range []int64{0, history.MaxTime - int64(time.Second), history.MaxTime - 501_000_001} {
			res, err := Check(context.Background(), shifted(ops, base), Options{WaitBound: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			p := res.Of(tc.prop)
			if p.Verdict != contract.Violated || len(p.Violations) == 0 || p.Violations[0].Rule != tc.rule {
				t.Errorf("%s at %d: %s %s %v; want violated by %s", tc.name, base, tc.prop, p.Verdict, p.Violations, tc.rule)
			}
		}
	}
}
