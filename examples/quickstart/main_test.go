package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/redistest"
)

// TestDecrementStock: eight concurrent buyers on real Redis servers (one
// for the lock, one for the stock) take eight items, none lost.
func TestDecrementStock(t *testing.T) {
	lockRedis, dataRedis := redistest.Start(t), redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := decrementStock(ctx, lockRedis.Addr, dataRedis.Addr, "sku-42", 100)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	left, err := decrementStock(ctx, lockRedis.Addr, dataRedis.Addr, "sku-42", 100)
	if err != nil || left != 91 {
		t.Fatalf("after 9 buyers: %d left, %v; want 91", left, err)
	}
}

// TestREADMEQuickStart: the README's quick start is this program verbatim.
func TestREADMEQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), fmt.Sprintf("```go\n%s```\n", code)) {
		t.Error("README.md does not hold examples/quickstart/main.go verbatim in a go code block")
	}
}
