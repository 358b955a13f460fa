// Package seeded is the randomness of a lock that a simulation can seed:
// owner tokens and jitter drawn from a source the caller gives
// (lock.Options.Rand), or from crypto/rand and math/rand/v2 when it gives
// none. It imports nothing of lockproof, so that the lock and its frozen
// copies in the zoo share it.
package seeded

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// Source is a math/rand/v2 source made safe for concurrent use; a nil
// *Source draws from crypto/rand (tokens) and math/rand/v2 (jitter).
type Source struct {
	mu  sync.Mutex
	src mrand.Source
}

// New wraps src; nil gives a nil *Source (the unseeded defaults).
func New(src mrand.Source) *Source {
	if src == nil {
		return nil
	}
	return &Source{src: src}
}

func (s *Source) uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

// Token returns a fresh 128-bit token, hex encoded.
func (s *Source) Token() string {
	var b [16]byte
	if s == nil {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go >= 1.24)
	} else {
		binary.LittleEndian.PutUint64(b[:8], s.uint64())
		binary.LittleEndian.PutUint64(b[8:], s.uint64())
	}
	return hex.EncodeToString(b[:])
}

// N returns a duration in [0, hi] (hi >= 0).
func (s *Source) N(hi time.Duration) time.Duration {
	if s == nil {
		return mrand.N(hi + 1)
	}
	return time.Duration(s.uint64() % uint64(hi+1))
}
