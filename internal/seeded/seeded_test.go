package seeded

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSeededDrawsAlike: two sources seeded alike make the same tokens and
// jitter (a simulation's replay); unseeded tokens are fresh; N stays in
// [0, hi].
func TestSeededDrawsAlike(t *testing.T) {
	a, b := New(rand.NewPCG(7, 1)), New(rand.NewPCG(7, 1))
	for range 10 {
		if x, y := a.Token(), b.Token(); x != y || len(x) != 32 {
			t.Fatalf("tokens %q and %q from one seed", x, y)
		}
		if x, y := a.N(time.Second), b.N(time.Second); x != y || x < 0 || x > time.Second {
			t.Fatalf("jitter %v and %v from one seed", x, y)
		}
	}
	var none *Source
	if x, y := none.Token(), none.Token(); x == y || len(x) != 32 {
		t.Fatalf("unseeded tokens %q and %q", x, y)
	}
	for range 100 {
		if d := none.N(time.Millisecond); d < 0 || d > time.Millisecond {
			t.Fatalf("unseeded jitter %v out of [0, 1ms]", d)
		}
	}
	if New(nil) != nil {
		t.Fatal("New(nil) is not the unseeded source")
	}
}
