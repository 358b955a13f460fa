//go:build !unix

package stallwatch

import (
	"testing"
	"time"
)

func freezer(t *testing.T) func(time.Duration) {
	t.Skip("no SIGSTOP here")
	return nil
}
