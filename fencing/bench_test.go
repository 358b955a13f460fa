package fencing_test

import (
	"context"
	"testing"

	"github.com/lockproof/lockproof/fencing"
)

// BenchmarkWrite measures one accepted fenced write (increasing tokens).
func BenchmarkWrite(b *testing.B) {
	for _, f := range fencedFlavours() {
		b.Run(f.name, func(b *testing.B) {
			r := f.new(b)
			ctx := context.Background()
			var tok uint64
			for b.Loop() {
				tok++
				if err := r.Write(ctx, "k", fencing.Write{Token: tok, Owner: "a", Value: "v"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadFenced measures one accepted fenced read (increasing tokens,
// so every read raises the fence).
func BenchmarkReadFenced(b *testing.B) {
	for _, f := range fencedFlavours() {
		b.Run(f.name, func(b *testing.B) {
			r := f.new(b)
			ctx := context.Background()
			var tok uint64
			for b.Loop() {
				tok++
				if _, err := r.ReadFenced(ctx, "k", tok, "a"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
