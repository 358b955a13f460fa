package history_test

import (
	"bytes"
	"fmt"

	"github.com/lockproof/lockproof/history"
)

// A history is JSON Lines, one op each: write it as ops complete, read it
// back validated, with each op's line number for error messages and
// checker explanations.
func Example() {
	ops := []history.Op{
		{Client: "a", Kind: history.Acquire, Key: "cart", Call: 0, Return: 2_000_000, Completed: true,
			Result: history.OK, TTLMillis: 500, Token: 7, HasToken: true},
		{Client: "a", Kind: history.Write, Key: "cart", Call: 3_000_000, Return: 4_000_000, Completed: true,
			Result: history.OK, Token: 7, HasToken: true, Value: "x", HasValue: true},
		// A release whose reply never came: recorded as never completed,
		// its result unknown (the checker treats it as either).
		{Client: "a", Kind: history.Release, Key: "cart", Call: 5_000_000, Result: history.Unknown, Token: 7, HasToken: true},
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	for _, op := range ops {
		if err := w.WriteOp(op); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Println(err)
		return
	}
	back, err := history.ReadAll(&buf, "cart.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range back {
		fmt.Printf("line %d: %s %s %s completed=%v\n", op.Line, op.Client, op.Kind, op.Result, op.Completed)
	}
	// Output:
	// line 1: a acquire ok completed=true
	// line 2: a write ok completed=true
	// line 3: a release unknown completed=false
}

// Bad input is refused with the file, line and field.
func ExampleReadAll_badInput() {
	_, err := history.ReadAll(bytes.NewBufferString(`{"client":"a","op":"acquire","key":"k","call":1,"return":2,"result":"maybe"}`+"\n"), "h.jsonl")
	fmt.Println(err)
	// Output:
	// h.jsonl:1: result: "maybe" is not a result of acquire (want ok, fail or unknown)
}
