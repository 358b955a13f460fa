package fencing_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/fencing"
)

// A fenced resource refuses a write whose token is below the last one it
// accepted: a holder paused past its lease wakes with token 41 after the
// next holder wrote with 42, and its late write is refused.
func Example() {
	ctx := context.Background()
	stock := fencing.NewMemory() // fencing.NewRedis(client, fencing.RedisOptions{}) on a real Redis
	if err := stock.Write(ctx, "item-1", fencing.Write{Token: 42, Owner: "b", Value: "9"}); err != nil {
		fmt.Println(err)
		return
	}
	err := stock.Write(ctx, "item-1", fencing.Write{Token: 41, Owner: "a", Value: "10"})
	fmt.Println("late write refused:", errors.Is(err, fencing.ErrStaleToken))
	v, _ := stock.Read(ctx, "item-1")
	fmt.Println("value:", v.Value, "fence:", v.Token)
	// Output:
	// late write refused: true
	// value: 9 fence: 42
}

// Read-modify-write needs a fenced read: it raises the fence to the
// reader's token, so a stale holder can neither read and act on state a
// newer holder may change, nor write after the newer holder read.
func ExampleMemory_ReadFenced() {
	ctx := context.Background()
	stock := fencing.NewMemory()
	_ = stock.Write(ctx, "item-1", fencing.Write{Token: 1, Owner: "a", Value: "10"})

	// b holds the lock with token 2 and decrements the stock.
	v, err := stock.ReadFenced(ctx, "item-1", 2, "b")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("b read", v.Value)
	_ = stock.Write(ctx, "item-1", fencing.Write{Token: 2, Owner: "b", Value: "9"})

	// a, paused with token 1, wakes and tries the same.
	_, err = stock.ReadFenced(ctx, "item-1", 1, "a")
	fmt.Println("a's read refused:", errors.Is(err, fencing.ErrStaleToken))
	// Output:
	// b read 10
	// a's read refused: true
}
