package main

import (
	"testing"

	"github.com/lockproof/lockproof/internal/toxitest"
)

// TestMain builds the Toxiproxy server the tests' environments run before
// any test starts one (internal/toxitest says why).
func TestMain(m *testing.M) { toxitest.Main(m) }
