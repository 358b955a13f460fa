package reports_test

import (
	"fmt"

	"github.com/lockproof/lockproof/reports"
)

// Load a run directory (summary.json and each scenario's files), build
// the report and read its verdict and guarantee sheet. reports.WriteAll
// writes report.html (index), a page per scenario, report.md, junit.xml
// and report.json into the directory, as `lockproof report DIR` does.
func Example() {
	run, err := reports.Load("testdata/run")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := reports.Build(run)
	fmt.Println(r.Status, "-", r.Headline)
	c := r.CellOf("setnx", "pause-client")
	p := c.Property("resource")
	fmt.Printf("setnx × pause-client: resource violated on %d of %d seeds, %s; counterexample %s lines %v\n",
		p.Violated, p.Decided(), p.Outcome, p.Counterexample, p.Lines)
	// Output:
	// fail - 2 verdicts not as expected in 2 of 7 scenarios; 1 unknown
	// setnx × pause-client: resource violated on 1 of 1 seeds, as-expected; counterexample setnx-pause-client-1 lines [6 7]
}

// Compare two runs as the nightly compares with the previous night: only
// summary.json is needed.
func ExampleCompare() {
	old, err := reports.LoadWith("testdata/run", reports.LoadOptions{SummaryOnly: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, b := reports.Build(old), reports.Build(old)
	d := reports.Compare(a, b)
	fmt.Println("new violations:", len(d.NewViolations), "rate drops:", len(d.RateDrops))
	// Output:
	// new violations: 0 rate drops: 0
}
