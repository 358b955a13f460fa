package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos/gate"
	"github.com/lockproof/lockproof/fencing"
	"github.com/lockproof/lockproof/history"
	"github.com/lockproof/lockproof/locker"
)

// newRecording is a recording over a fresh recorder and gate: no Redis.
func newRecording() (recording, *history.Recorder) {
	rec := history.NewRecorder(&bytes.Buffer{}, history.Options{})
	return recording{rec: rec, gate: gate.New(), invoked: &atomic.Pointer[history.Op]{}}, rec
}

func TestRecordingLock(t *testing.T) {
	r, rec := newRecording()
	op := history.Op{Client: "c", Kind: history.Acquire, Key: "k", TTLMillis: 100}
	var deadline time.Duration
	res, err := r.lock(context.Background(), op, ctxNormal, time.Second, func(ctx context.Context) error {
		if got := r.invoked.Load(); got == nil || got.Kind != history.Acquire {
			t.Errorf("op in flight = %v; want the acquire", got)
		}
		d, _ := ctx.Deadline()
		deadline = time.Until(d)
		return nil
	}, func(o *history.Op) { o.Token, o.HasToken = 7, true })
	if err != nil || res != history.OK || deadline <= 0 || deadline > time.Second {
		t.Fatalf("ok acquire: %s, %v, deadline in %v; want ok within 1s", res, err, deadline)
	}
	if r.invoked.Load() != nil {
		t.Error("the op stays in flight after it completed")
	}
	// A canceled context is canceled before the call; a tiny one has tinyDeadline.
	_, _ = r.lock(context.Background(), op, ctxCanceled, time.Second, func(ctx context.Context) error {
		if ctx.Err() == nil {
			t.Error("ctxCanceled: the call's context is live")
		}
		return ctx.Err()
	}, nil)
	_, _ = r.lock(context.Background(), op, ctxTiny, time.Hour, func(ctx context.Context) error {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > tinyDeadline {
			t.Errorf("ctxTiny: deadline in %v", time.Until(d))
		}
		return nil
	}, nil)
	// Failure, the lock lacking the op (withdrawn), bad input (an error).
	if res, _ := r.lock(context.Background(), op, ctxNormal, time.Second, func(context.Context) error {
		return fmt.Errorf("busy: %w", locker.ErrNotAcquired)
	}, func(o *history.Op) { t.Error("edit ran for a failed op") }); res != history.Fail {
		t.Errorf("not acquired: %s; want fail", res)
	}
	if res, err := r.lock(context.Background(), op, ctxNormal, time.Second, func(context.Context) error {
		return locker.ErrUnsupported
	}, nil); res != "" || err != nil {
		t.Errorf("unsupported: %q, %v; want nothing recorded", res, err)
	}
	if _, err := r.lock(context.Background(), op, ctxNormal, time.Second, func(context.Context) error {
		return locker.ErrInvalid
	}, nil); !errors.Is(err, locker.ErrInvalid) {
		t.Errorf("invalid: %v; want the error", err)
	}
	ops := rec.Ops()
	if len(ops) != 4 || ops[0].Token != 7 || !ops[0].HasToken || ops[1].Result != history.Unknown ||
		ops[2].Result != history.OK || ops[3].Result != history.Fail {
		t.Fatalf("recorded %+v; want ok (token 7), unknown (canceled), ok, fail, and nothing for the withdrawn two", ops)
	}
}

// A client that crashes during a call stops its worker, the op left
// pending: it never returned.
func TestRecordingCrash(t *testing.T) {
	r, rec := newRecording()
	op := history.Op{Client: "c", Kind: history.Release, Key: "k"}
	res, err := r.lock(context.Background(), op, ctxNormal, time.Second, func(context.Context) error {
		r.gate.Crash()
		return gate.ErrCrashed
	}, nil)
	if !errors.Is(err, errStop) || res != "" {
		t.Fatalf("crash during a release: %q, %v; want errStop", res, err)
	}
	_, err = r.resource(context.Background(), history.Op{Client: "c", Kind: history.Write, Key: "k", Value: "v"}, time.Second,
		func(context.Context) error { return gate.ErrCrashed }, nil)
	if !errors.Is(err, errStop) {
		t.Fatalf("write of a crashed client: %v; want errStop", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range rec.Ops() {
		if o.Completed {
			t.Errorf("op %s of the crashed client completed as %s; want it pending", o.Kind, o.Result)
		}
	}
}

func TestRecordingResource(t *testing.T) {
	r, rec := newRecording()
	read := history.Op{Client: "c", Kind: history.Read, Key: "k", Token: 3, HasToken: true}
	var v fencing.Value
	res, err := r.resource(context.Background(), read, time.Second, func(context.Context) error {
		v = fencing.Value{Value: "x"}
		return nil
	}, func(o *history.Op) { o.Value = v.Value })
	if err != nil || res != history.OK {
		t.Fatalf("read: %s, %v", res, err)
	}
	if res, _ := r.resource(context.Background(), read, time.Second, func(context.Context) error {
		return &fencing.StaleError{Key: "k"}
	}, func(o *history.Op) { t.Error("edit ran for a refused read") }); res != history.Rejected {
		t.Errorf("stale token: %s; want rejected", res)
	}
	if _, err := r.resource(context.Background(), history.Op{Client: "c", Kind: history.Write, Key: "k"}, time.Second,
		func(context.Context) error { return fmt.Errorf("no token: %w", fencing.ErrInvalid) }, nil); !errors.Is(err, fencing.ErrInvalid) {
		t.Errorf("malformed write: %v; want the error (a workload bug)", err)
	}
	ops := rec.Ops()
	if len(ops) != 2 || ops[0].Value != "x" || ops[1].Result != history.Rejected {
		t.Fatalf("recorded %+v; want the read of x, the refused read, and not the malformed write", ops)
	}
}
