package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/internal/toxitest"
)

// TestMain builds the Toxiproxy server the tests' environments run before
// any test starts one (internal/toxitest says why).
func TestMain(m *testing.M) { toxitest.Main(m) }

// TestHelpBogusAndFlagSuggestions (issue 63.4): help of an unknown
// command exits 2 naming it, as the unknown command itself does; a
// misspelt flag gets a "did you mean" and a pointer to help, not the
// command's whole flag list.
func TestHelpBogusAndFlagSuggestions(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch(context.Background(), []string{"help", "bogus"}, &out, &errb); code != exitBadInput || !strings.Contains(errb.String(), `"bogus"`) {
		t.Errorf("help bogus: exit %d, %q; want %d naming it", code, errb.String(), exitBadInput)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--seed", "3"}, "did you mean --seeds?"},
		{[]string{"report", "--merg"}, "did you mean --merge?"},
		{[]string{"sim", "--lock", "fenced"}, "did you mean --locks?"},
	} {
		errb.Reset()
		code := dispatch(context.Background(), c.args, &out, &errb)
		if code != exitBadInput || !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") > 4 {
			t.Errorf("%v: exit %d, %q; want %d saying %q in a few lines", c.args, code, errb.String(), exitBadInput, c.want)
		}
	}
	errb.Reset()
	if code := dispatch(context.Background(), []string{"run", "--zzzzzz"}, &out, &errb); code != exitBadInput || strings.Contains(errb.String(), "did you mean") || !strings.Contains(errb.String(), "lockproof help run") {
		t.Errorf("run --zzzzzz: exit %d, %q; want no suggestion, a pointer to lockproof help run", code, errb.String())
	}
}
