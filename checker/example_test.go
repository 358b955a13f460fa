package checker_test

import (
	"context"
	"fmt"

	"github.com/lockproof/lockproof/checker"
	"github.com/lockproof/lockproof/contract"
	"github.com/lockproof/lockproof/history"
)

const ms = 1_000_000 // history times are nanoseconds

// Check a history for the three guarantees. Here b is granted the lock
// while a's 500ms lease is surely still valid: G1 (lease mutual
// exclusion) is violated, and the violation names the history lines.
func ExampleCheck() {
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "cart", Call: 0, Return: 1 * ms, Completed: true,
			Result: history.OK, TTLMillis: 500, Token: 1, HasToken: true},
		{Client: "b", Kind: history.Acquire, Key: "cart", Call: 100 * ms, Return: 101 * ms, Completed: true,
			Result: history.OK, TTLMillis: 500, Token: 2, HasToken: true},
	}
	for i := range ops {
		ops[i].Line = i + 1
	}
	res, err := checker.Check(context.Background(), ops, checker.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("lease:", res.Of(contract.PropLease).Verdict)
	v := res.Of(contract.PropLease).Violations[0]
	fmt.Println("rule:", v.Rule, "lines:", v.Lines)
	fmt.Println("resource:", res.Of(contract.PropResource).Verdict)
	// Output:
	// lease: violated
	// rule: mutual-exclusion lines: [1 2]
	// resource: n/a
}

// A check has a budget: when it runs out the verdict is unknown, never ok.
func ExampleCheck_budget() {
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "k", Call: 0, Return: 1 * ms, Completed: true,
			Result: history.OK, TTLMillis: 500, Token: 1, HasToken: true, Line: 1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a budget already spent
	res, err := checker.Check(ctx, ops, checker.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Verdict)
	// Output:
	// unknown
}
