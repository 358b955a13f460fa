package lockotel_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lockproof/lockproof/lock"
	"github.com/lockproof/lockproof/lockotel"
)

// A lock whose calls become spans and metrics, both written to stdout
// (swap the exporters for OTLP ones in production). It needs a Redis on
// localhost:6379, so it is compiled, not run, by go test.
func Example() {
	ctx := context.Background()
	spans, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(os.Stdout))
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(
		sdkmetric.NewPeriodicReader(metrics, sdkmetric.WithInterval(10*time.Second))))
	defer func() { _ = mp.Shutdown(ctx) }() // exports what is left

	hooks, err := lockotel.New(lockotel.Options{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer func() { _ = rdb.Close() }()
	locks, err := lock.New(rdb, lock.Options{TTL: 10 * time.Second, Watchdog: true, Hooks: hooks})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = locks.Close(ctx) }()

	// A span lock.acquire, then lock.hold until the release's lock.release;
	// lock.acquire.duration and lock.hold.duration get one measurement each.
	lease, err := locks.Acquire(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	// ... work under lease.Fence() ...
	if err := lease.Release(ctx); err != nil {
		log.Print(err)
	}
}
