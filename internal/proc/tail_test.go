package proc

import (
	"strings"
	"testing"
)

// TestTailDropsTheCutLine: a Tail that dropped its front starts at a
// whole line, so a secret printed on the line cut in two is not quoted
// in part; one that dropped nothing, or holds one line, is kept whole.
func TestTailDropsTheCutLine(t *testing.T) {
	var tail Tail
	_, _ = tail.Write([]byte("first line\nsecond\n"))
	if got := tail.String(); got != "first line\nsecond" {
		t.Errorf("nothing dropped: %q", got)
	}
	var cut Tail
	_, _ = cut.Write([]byte("hello password=" + strings.Repeat("s", tailMax) + "\n"))
	_, _ = cut.Write([]byte("Traceback: the last line\n"))
	if got := cut.String(); got != "Traceback: the last line" {
		t.Errorf("front dropped: %q; want the whole lines after the cut one", got)
	}
	var long Tail
	_, _ = long.Write([]byte(strings.Repeat("x", 2*tailMax)))
	if got := long.String(); len(got) != tailMax {
		t.Errorf("one long line: kept %d bytes; want %d", len(got), tailMax)
	}
}
