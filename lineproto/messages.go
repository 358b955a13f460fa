package lineproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version this package speaks (docs/LINEPROTO.md):
// its hello says it, and a process answers with the version it speaks,
// MinVersion to Version; another is refused. Version 2 adds holds with
// modes (a read-write lock, a semaphore): hello's modes and capacity,
// acquire's mode and permits. A process of version 1 is run as before.
const Version = 2

// MinVersion is the oldest version a process may answer hello with.
const MinVersion = 1

// The modes of a version 2 lock's holds (hello's modes, acquire's mode):
// package locker's.
const (
	ModeRead    = "read"
	ModeWrite   = "write"
	ModePermits = "permits"
)

// The operations of a request (docs/LINEPROTO.md, "Requests").
const (
	OpHello   = "hello"
	OpPing    = "ping"
	OpAcquire = "acquire"
	OpRelease = "release"
	OpRenew   = "renew"
	OpReenter = "reenter"
	OpClose   = "close"
	// OpWait is not a request: a lock lists it in its hello reply's ops
	// when acquire takes wait=true (a blocking acquire).
	OpWait = "wait"
)

// The results of a reply: each maps to a history result by package
// locker's rules (Outcomes).
const (
	ResultOK          = "ok"          // done
	ResultFail        = "fail"        // surely no effect: not acquired, not held
	ResultUnknown     = "unknown"     // may or may not have taken effect
	ResultUnsupported = "unsupported" // the lock has no such operation; it sent nothing
)

// Redis is where the lock's process reaches Redis: one endpoint the
// harness serves on loopback, which follows the deployment's master
// through the client's own Toxiproxy links (so every network fault
// reaches the process as it reaches a Go client).
type Redis struct {
	Addr     string `json:"addr"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
}

// Request is one line the harness writes to the process's stdin.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`

	// hello
	Version int    `json:"version,omitempty"`
	Client  string `json:"client,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	Redis   *Redis `json:"redis,omitempty"`

	// acquire (Key, TTLMillis, Wait), release, renew and reenter (Lease;
	// TTLMillis for renew and reenter)
	Key       string `json:"key,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Wait      bool   `json:"wait,omitempty"`
	Lease     uint64 `json:"lease,omitempty"`
	// Mode and Permits (version 2, acquire, to a lock whose hello named
	// modes): the hold asked for, and how many permits (ModePermits).
	Mode    string `json:"mode,omitempty"`
	Permits int    `json:"permits,omitempty"`
	// TimeoutMillis is what is left of the caller's context: the process
	// must answer within it (a blocking acquire gives up its wait by
	// then). 0: no deadline.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
}

// Reply is one line the process writes to stdout: a reply (ID set) or an
// event (Event set, ID 0).
type Reply struct {
	ID     uint64 `json:"id"`
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// TookMicros is the time the lock spent on the request inside the
	// process, when it measures it: the harness subtracts it from the
	// round trip to state the protocol's own latency.
	TookMicros int64 `json:"took_us,omitempty"`

	// acquire and reenter: the lease the process made (its id, unique in
	// the process), its fence and validity when the lock has them.
	Lease uint64  `json:"lease,omitempty"`
	Fence *uint64 `json:"fence,omitempty"`
	// ValidMillis: for how long from now (the reply's writing) the lease
	// is surely held, by the lock's own reckoning; acquire, reenter and
	// renew replies of a lock that claims validity.
	ValidMillis *int64 `json:"valid_ms,omitempty"`

	// hello
	Version int      `json:"version,omitempty"`
	Lock    string   `json:"lock,omitempty"`
	Ops     []string `json:"ops,omitempty"`
	Fenced  bool     `json:"fenced,omitempty"`
	Claims  bool     `json:"claims,omitempty"`
	Notices bool     `json:"notices,omitempty"`
	// Modes and Capacity (version 2): the lock's holds have modes, read
	// and write (a read-write lock) or permits (a semaphore of Capacity
	// permits).
	Modes    []string `json:"modes,omitempty"`
	Capacity int      `json:"capacity,omitempty"`

	// events
	Event   string `json:"event,omitempty"`
	Renewal uint64 `json:"renewal,omitempty"`
	TTL     int64  `json:"ttl_ms,omitempty"`
}

// The events a process sends on its own (docs/LINEPROTO.md, "Events").
const (
	// EventLost: the lock learnt or decided that lease Lease is lost
	// (locker.Lease.Lost).
	EventLost = "lost"
	// EventRenewing: the lock starts a background renewal of Lease for
	// ttl_ms, numbered Renewal (locker.Observer); EventRenewed, with the
	// same Renewal and a Result, ends it.
	EventRenewing = "renewing"
	EventRenewed  = "renewed"
)

// ErrProtocol is the error of a line that breaks the protocol (not JSON,
// an unknown result or event, a reply to no request); it wraps
// locker.ErrInvalid, so the workload stops at the next call (the history
// recorded so far is kept).
type ErrProtocol struct {
	Client string // the workload client the process serves
	Line   int    // 1-based line of the process's stdout
	Text   string // the line, its password redacted, cut to 200 bytes
	Reason string
}

func (e *ErrProtocol) Error() string {
	return fmt.Sprintf("lock process of client %s: stdout line %d: %s: %q (docs/LINEPROTO.md)", e.Client, e.Line, e.Reason, e.Text)
}

// parseLine decodes one line of the process's stdout, checking what the
// protocol requires of it.
func parseLine(b []byte) (Reply, string) {
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return r, "not JSON: " + err.Error()
		}
		if te.Field == "" {
			return r, "not a JSON object but " + jsonKind(te.Value)
		}
		return r, fieldRule(te.Field, jsonKind(te.Value))
	}
	if r.ValidMillis != nil && *r.ValidMillis < 0 {
		return r, fieldRule("valid_ms", strconv.FormatInt(*r.ValidMillis, 10))
	}
	if r.TookMicros < 0 {
		return r, fieldRule("took_us", strconv.FormatInt(r.TookMicros, 10))
	}
	if r.Event != "" {
		if r.ID != 0 {
			return r, "an event carries no id"
		}
		switch r.Event {
		case EventLost:
			if r.Lease == 0 {
				return r, `event "lost" without a lease`
			}
		case EventRenewing:
			if r.Lease == 0 || r.Renewal == 0 || r.TTL <= 0 {
				return r, `event "renewing" needs lease, renewal and ttl_ms > 0`
			}
		case EventRenewed:
			if r.Renewal == 0 || !validResult(r.Result) {
				return r, `event "renewed" needs renewal and a result (ok, fail, unknown)`
			}
		default:
			return r, fmt.Sprintf("unknown event %q", r.Event)
		}
		return r, ""
	}
	if r.ID == 0 {
		return r, "a reply without an id (or an event without a name)"
	}
	if !validResult(r.Result) && r.Result != ResultUnsupported {
		return r, fmt.Sprintf("result %q: want ok, fail, unknown or unsupported", r.Result)
	}
	return r, ""
}

// replyFields is the type and range of each field of a reply or event
// line (docs/LINEPROTO.md, "Fields of a line"): what a line that breaks
// one is told.
var replyFields = map[string]string{
	"id":       "a positive integer",
	"result":   "a string",
	"error":    "a string",
	"took_us":  "an integer ≥ 0 (microseconds)",
	"lease":    "a positive integer",
	"fence":    "an integer ≥ 0",
	"valid_ms": "an integer ≥ 0 (milliseconds)",
	"version":  "an integer",
	"lock":     "a string",
	"ops":      "an array of strings",
	"fenced":   "a boolean",
	"claims":   "a boolean",
	"notices":  "a boolean",
	"modes":    "an array of strings",
	"capacity": "a positive integer",
	"event":    "a string",
	"renewal":  "a positive integer",
	"ttl_ms":   "a positive integer (milliseconds)",
}

// jsonKind names the JSON value encoding/json's UnmarshalTypeError
// describes ("object", "number 1.5"): "an object", "1.5".
func jsonKind(v string) string {
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return n
	}
	switch v {
	case "object", "array":
		return "an " + v
	case "bool":
		return "a boolean"
	}
	return "a " + v
}

// fieldRule says that field must be what replyFields says, not what the
// line gave (got: "object", "number 1.5", "-3").
func fieldRule(field, got string) string {
	rule, ok := replyFields[field]
	if !ok {
		rule = "of another type"
	}
	return fmt.Sprintf("field %q must be %s, not %s", field, rule, got)
}

func validResult(s string) bool {
	return s == ResultOK || s == ResultFail || s == ResultUnknown
}

// millis is d in whole milliseconds, at least 1 for a positive d.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(1, d.Milliseconds())
}
