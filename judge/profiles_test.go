package judge

import (
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/contract"
)

// TestProfilesProseNamesEveryRowsTraits: the prose of the profiles'
// predictions (profiles.go) names every trait that keys a row of the
// table (profileRows), so that a row added for a new trait is said in
// words too.
func TestProfilesProseNamesEveryRowsTraits(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "profiles.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var prose string
	for _, c := range f.Comments {
		if text := c.Text(); strings.HasPrefix(text, "The profiles' predictions:") {
			prose = text
		}
	}
	if prose == "" {
		t.Fatal("profiles.go has no comment starting \"The profiles' predictions:\"")
	}
	for i, r := range profileRows() {
		for _, key := range []contract.FaultTraits{r.when, r.unless} {
			v := reflect.ValueOf(key)
			for j := range v.NumField() {
				if name := v.Type().Field(j).Name; !v.Field(j).IsZero() && !strings.Contains(prose, name) {
					t.Errorf("row %d is keyed by trait %s, which the prose of the profiles' predictions does not name", i, name)
				}
			}
		}
		if r.why == "" {
			t.Errorf("row %d says no why", i)
		}
	}
}
