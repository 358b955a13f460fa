package contract

import (
	"errors"
	"testing"
)

func TestPoint(t *testing.T) {
	for _, c := range []struct {
		p    Point
		str  string
		zero bool
		bad  bool
	}{
		{Point{}, "", true, false},
		{Point{After: "get"}, "after get", false, false},
		{Point{Before: "pexpire"}, "before pexpire", false, false},
		{Point{After: "get", Before: "del"}, "after get", false, true},
		{Point{After: "get del"}, "after get del", false, true},
	} {
		if got := c.p.String(); got != c.str {
			t.Errorf("%+v: String %q, want %q", c.p, got, c.str)
		}
		if c.p.IsZero() != c.zero {
			t.Errorf("%+v: IsZero %v, want %v", c.p, c.p.IsZero(), c.zero)
		}
		if err := c.p.Check(); (err != nil) != c.bad || err != nil && !errors.Is(err, ErrBadPoint) {
			t.Errorf("%+v: Check %v, want bad %v", c.p, err, c.bad)
		}
	}
}
