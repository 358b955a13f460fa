package nodes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

func client(n *Net, name, addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Dialer: n.Dialer(name), ContextTimeoutEnabled: true,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
}

// oneNode starts a network of one node and client "a" of it, both closed
// when the test ends (inside its bubble).
func oneNode(t *testing.T) (*Net, *redis.Client, string) {
	const addr = "127.0.0.1:1"
	n := NewNet(1, addr)
	t.Cleanup(n.Close)
	a := client(n, "a", addr)
	t.Cleanup(func() { _ = a.Close() })
	return n, a, addr
}

// TestNetFaults: a delay costs its virtual time, a cut drops a client's
// messages (its call times out, another client's passes), a paused node
// holds requests until it resumes (and then serves them), a lost reply
// leaves a command that ran, and keys expire on the bubble's clock.
func TestNetFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const addr = "127.0.0.1:1"
		n := NewNet(1, addr)
		defer n.Close()
		a, b := client(n, "a", addr), client(n, "b", addr)
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		if err := a.Set(ctx, "k", "v", 100*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}

		if err := n.SetRates(Rates{Delay: 5 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := a.Get(ctx, "k").Err(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d <= 10*time.Millisecond || d > 10*time.Millisecond+2*Transit {
			t.Errorf("a round trip took %v, want 10ms (5ms each way) and a transit each way", d)
		}
		_ = n.SetRates(Rates{})

		time.Sleep(100 * time.Millisecond)
		if err := a.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("a key with a 100ms TTL, 110ms later: %v, want redis.Nil", err)
		}

		n.Cut("a")
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := a.Set(cctx, "c", "1", 0).Err()
		cancel()
		if err == nil {
			t.Error("a cut-off client's SET returned ok")
		}
		if err := b.Set(ctx, "d", "1", 0).Err(); err != nil {
			t.Errorf("another client during the cut: %v", err)
		}
		n.Heal()
		if got := n.Node(addr).M.Exists("c"); got {
			t.Error("a cut-off client's SET reached the node")
		}
		if c := n.Counts(); c.Blackholed == 0 {
			t.Errorf("counts %+v: nothing blackholed", c)
		}

		n.Pause(addr)
		done := make(chan error, 1)
		go func() { done <- b.Set(ctx, "p", "1", 0).Err() }()
		time.Sleep(300 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("a SET to a paused node returned: %v", err)
		default:
		}
		n.Resume()
		if err := <-done; err != nil {
			t.Errorf("the held SET after the node resumed: %v", err)
		}

		if err := n.SetRates(Rates{LoseReply: 1}); err != nil {
			t.Fatal(err)
		}
		if err := b.Set(ctx, "l", "1", 0).Err(); err == nil {
			t.Error("a SET whose reply was lost returned ok")
		}
		_ = n.SetRates(Rates{})
		if !n.Node(addr).M.Exists("l") {
			t.Error("the command whose reply was lost did not run")
		}
	})
}

// TestLateDelivery: a request held in transit past its sender's deadline
// lands after the sender gave up (its call returned an error and its
// connection closed), at its time and not before; one held less than
// the deadline reaches its sender as usual, late.
func TestLateDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, addr := oneNode(t)
		ctx := context.Background()
		if err := a.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := n.SetRates(Rates{Late: 1, LateBy: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := a.Set(ctx, "k", "v", 0).Err(); err == nil {
			t.Fatal("a SET held 2s in transit returned ok within its 1s read timeout")
		}
		if d := time.Since(start); d > 1100*time.Millisecond {
			t.Errorf("the SET returned after %v, want its 1s read timeout", d)
		}
		_ = n.SetRates(Rates{})
		if n.Node(addr).M.Exists("k") {
			t.Fatal("the late SET landed before its time")
		}
		select {
		case <-n.LateSettled():
			t.Fatal("LateSettled with a late SET in transit")
		default:
		}
		<-n.LateSettled()
		if d := time.Since(start); d < 2*time.Second {
			t.Errorf("LateSettled %v after the SET was sent, want at least its 2s in transit", d)
		}
		time.Sleep(2 * time.Second)
		if !n.Node(addr).M.Exists("k") {
			t.Fatal("the late SET never landed after its sender gave up")
		}
		if c := n.Counts(); c.Late != 1 || c.Orphaned != 1 {
			t.Errorf("counts %+v: want 1 late, 1 orphaned", c)
		}

		// Held less than the deadline: the reply comes, late.
		if err := n.SetRates(Rates{Late: 1, LateBy: 300 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := a.Set(ctx, "j", "v", 0).Err(); err != nil {
			t.Fatalf("a SET held 300-450ms: %v", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("a SET held in transit took %v, want at least 300ms", d)
		}
		_ = n.SetRates(Rates{})
		if c := n.Counts(); c.Late != 2 || c.Orphaned != 1 {
			t.Errorf("counts %+v: want 2 late, 1 orphaned", c)
		}
	})
}

// TestDrain: with Rates.Drain, a request still on its way when its
// sender gives up and closes the connection lands at its time (as TCP
// delivers what was written before the FIN), after a request the sender
// made later on another connection; without it the close loses it.
func TestDrain(t *testing.T) {
	for _, drain := range []bool{true, false} {
		t.Run(map[bool]string{true: "Drain", false: "NoDrain"}[drain], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, a, addr := oneNode(t)
				ctx := context.Background()
				if err := a.Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				if err := n.SetRates(Rates{Delay: 20 * time.Millisecond, Drain: drain}); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
				err := a.Set(short, "k", "first", 0).Err()
				cancel()
				if err == nil {
					t.Fatal("a SET 20ms in transit returned ok within its 5ms deadline")
				}
				// The next request goes on a new connection, with no
				// delay: it overtakes the first.
				_ = n.SetRates(Rates{})
				if err := a.Set(ctx, "k", "second", 0).Err(); err != nil {
					t.Fatal(err)
				}
				if got, _ := n.Node(addr).M.Get("k"); got != "second" {
					t.Fatalf("k = %q before the first SET's time, want the second's", got)
				}
				time.Sleep(30*time.Millisecond - time.Since(start))
				got, _ := n.Node(addr).M.Get("k")
				c := n.Counts()
				if drain && (got != "first" || c.Drained != 1) {
					t.Errorf("k = %q, %d drained: want the first SET landed after the second, 1 drained", got, c.Drained)
				}
				if !drain && (got != "second" || c.Drained != 0) {
					t.Errorf("k = %q, %d drained: without Drain the closed connection loses the first SET", got, c.Drained)
				}
			})
		})
	}
}

// TestRefuseWrites: a node refusing every write answers a SET and a
// script that writes with -OOM in their place and runs neither, while
// reads and a script that only reads pass and another node takes its
// writes; put back to 0, it takes them again.
func TestRefuseWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const addr, other = "127.0.0.1:1", "127.0.0.1:2"
		n := NewNet(1, addr, other)
		defer n.Close()
		a, b := client(n, "a", addr), client(n, "a", other)
		defer a.Close()
		defer b.Close()
		ctx := context.Background()
		if err := a.Set(ctx, "k", "before", 0).Err(); err != nil {
			t.Fatal(err)
		}
		n.RefuseWrites(addr, 1)
		var rerr redis.Error
		if err := a.Set(ctx, "k", "refused", 0).Err(); !errors.As(err, &rerr) || !strings.HasPrefix(err.Error(), "OOM ") {
			t.Errorf("a SET to a node out of memory: %v, want an -OOM error reply", err)
		}
		script := redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
		if err := script.Run(ctx, a, []string{"k"}, "script").Err(); !errors.As(err, &rerr) || !strings.HasPrefix(err.Error(), "OOM ") {
			t.Errorf("a script to a node out of memory: %v, want an -OOM error reply", err)
		}
		if got, err := a.Get(ctx, "k").Result(); err != nil || got != "before" {
			t.Errorf("GET k = %q, %v: want the value from before, the read passing", got, err)
		}
		lookup := redis.NewScript(`return redis.call('GET', KEYS[1])`)
		if got, err := lookup.Run(ctx, a, []string{"k"}).Result(); err != nil || got != "before" {
			t.Errorf("a script that only reads: %v, %v: want it run, the value from before", got, err)
		}
		if err := b.Set(ctx, "k", "elsewhere", 0).Err(); err != nil {
			t.Errorf("a SET to another node: %v", err)
		}
		if c := n.Counts(); c.OutOfMemory < 2 {
			t.Errorf("counts %+v: want the SET and the script refused", c)
		}
		n.RefuseWrites(addr, 0)
		if err := a.Set(ctx, "k", "after", 0).Err(); err != nil {
			t.Errorf("a SET once the node takes writes again: %v", err)
		}
	})
}

// TestRatesValidate names the field out of range.
func TestRatesValidate(t *testing.T) {
	for _, c := range []struct {
		r     Rates
		field string
	}{{Rates{Delay: -1}, "Delay"}, {Rates{Jitter: -1}, "Jitter"}, {Rates{Drop: 2}, "Drop"}, {Rates{LoseReply: -0.1}, "LoseReply"},
		{Rates{Late: 1.5, LateBy: time.Second}, "Late"}, {Rates{Late: 0.5}, "LateBy"}, {Rates{LateBy: -1}, "LateBy"}} {
		if err := c.r.Validate(); err == nil || !strings.Contains(err.Error(), "Rates."+c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.r, err, c.field)
		}
	}
	if err := (Rates{Delay: time.Millisecond, Drop: 0.5}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestOnlySetUp: a connection's set-up commands (delivered at once, never
// lost: see message) are told from the first other command.
func TestOnlySetUp(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{"*2\r\n$5\r\nhello\r\n$1\r\n3\r\n", true},
		{"*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$8\r\nLIB-NAME\r\n$8\r\ngo-redis\r\n*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$7\r\nLIB-VER\r\n$1\r\n9\r\n", true},
		{"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", false},
		{"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", false},
		{"*2\r\n$5\r\nhel", false},
		{"", false},
	} {
		if got := onlySetUp([]byte(c.msg)); got != c.want {
			t.Errorf("%q: %v, want %v", c.msg, got, c.want)
		}
	}
}

// TestPubSubFaults: a node that refuses SUBSCRIBE answers it with an
// error while commands pass; DropSubscribed resets only the connections
// that subscribed; StallDials holds back the requests of connections
// dialed in its span, for its time, and not those of open ones.
func TestPubSubFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, addr := oneNode(t)
		ctx := context.Background()

		n.RefuseSubscribe(addr, true)
		ps := a.Subscribe(ctx, "ch")
		if _, err := ps.ReceiveTimeout(ctx, time.Second); err == nil || !strings.Contains(err.Error(), refusedCommand) {
			t.Errorf("SUBSCRIBE while refused: %v, want the refusal", err)
		}
		_ = ps.Close()
		if err := a.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Errorf("a command while SUBSCRIBE is refused: %v", err)
		}
		n.RefuseSubscribe(addr, false)
		if c := n.Counts(); c.Refused != 1 {
			t.Errorf("counts %+v: want 1 refused", c)
		}

		ps = a.Subscribe(ctx, "ch")
		defer ps.Close()
		if _, err := ps.ReceiveTimeout(ctx, time.Second); err != nil {
			t.Fatalf("SUBSCRIBE accepted again: %v", err)
		}
		if got := n.DropSubscribed(addr); got != 1 {
			t.Errorf("DropSubscribed: %d connections, want the one subscriber", got)
		}
		if _, err := ps.ReceiveTimeout(ctx, 100*time.Millisecond); err == nil {
			t.Error("the dropped subscriber received")
		}
		if err := a.Get(ctx, "k").Err(); err != nil {
			t.Errorf("a command connection after the drop: %v", err)
		}

		b := client(n, "b", addr)
		defer b.Close()
		n.StallDials(10*time.Millisecond, 300*time.Millisecond)
		start := time.Now()
		if err := a.Get(ctx, "k").Err(); err != nil || time.Since(start) > 10*time.Millisecond {
			t.Errorf("an open connection during the stall: %v after %v", err, time.Since(start))
		}
		start = time.Now()
		if err := b.Get(ctx, "k").Err(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("a connection dialed in the stall served after %v, want 300ms", d)
		}
		if c := n.Counts(); c.Stalled != 1 {
			t.Errorf("counts %+v: want 1 stalled", c)
		}
	})
}
