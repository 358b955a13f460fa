package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockproof/lockproof/chaos/workload"
	"github.com/lockproof/lockproof/history"
)

// MaxDuration and MaxClients bound a simulated run (lockproof sim's
// --duration and --clients, a regressions file's duration_ms and
// clients): the history, and every client's goroutines and connection
// pool, live in one worker's memory, which an unbounded duration_ms
// grows by about 150 MB a second.
const (
	MaxDuration = 10 * time.Minute
	MaxClients  = 64
)

// Regression is one line of a regressions file (`lockproof sim --out DIR`
// writes DIR/regressions.jsonl): a seed to replay, and the digest its
// history must have again.
type Regression struct {
	Lock string `json:"lock"`
	Seed uint64 `json:"seed"`
	// Faults is the seed's mix as sim.Label names it ("latency+reset",
	// "none"), or any `lockproof sim --faults` setting (files written
	// before 2026-11-26 say "swarm": that replays today's swarm, whose
	// catalogue has grown since, so such a seed may run another mix).
	Faults     string `json:"faults"`
	DurationMs int64  `json:"duration_ms"`
	// Mix and Clients are the workload's shape when the run set one
	// (lockproof sim --mix, --clients; workload.ParseMix's syntax); files
	// written before 2026-11-29 have neither: the defaults.
	Mix     string `json:"mix,omitempty"`
	Clients int    `json:"clients,omitempty"`
	// SHA256 is the digest of the history file (Encode).
	SHA256 string `json:"sha256"`
	// Why: "not as expected", "unknown", "failed", or the first finding
	// of a property ("first violated lease").
	Why string `json:"why"`
}

// Encode returns the history file of ops (history.Writer's bytes) and its
// SHA-256 in hex: two runs of a seed give the same.
func Encode(ops []history.Op) ([]byte, string, error) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	for i, o := range ops {
		if err := w.WriteOp(o); err != nil {
			return nil, "", fmt.Errorf("op %d: %w", i, err)
		}
	}
	if err := w.Flush(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:]), nil
}

// ReadRegressions reads a regressions file, naming the file and line of a
// bad entry.
func ReadRegressions(file string) ([]Regression, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Regression
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r Regression
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
		}
		switch {
		case r.Lock == "":
			err = errors.New("lock: missing")
		case r.DurationMs <= 0:
			err = fmt.Errorf("duration_ms: %d: must be positive", r.DurationMs)
		case r.DurationMs > MaxDuration.Milliseconds():
			err = fmt.Errorf("duration_ms: %d: at most %d (%v of virtual time)", r.DurationMs, MaxDuration.Milliseconds(), MaxDuration)
		case len(r.SHA256) != 64:
			err = fmt.Errorf("sha256: %q: want 64 hex digits", r.SHA256)
		case r.Faults == "":
			err = errors.New("faults: missing")
		case r.Clients < 0 || r.Clients > MaxClients:
			err = fmt.Errorf("clients: %d: want 0 (the default) to %d", r.Clients, MaxClients)
		case r.Mix != "":
			if _, merr := workload.ParseMix(r.Mix); merr != nil {
				err = fmt.Errorf("mix: %w", merr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no regression in it", file)
	}
	return out, nil
}
