package contract

// Exit codes of `lockproof check` and `lockproof run` (docs/DESIGN.md);
// contract.Summary.Status returns the first four.
const (
	// ExitOK: every verdict ok (check) or as expected (run).
	ExitOK = 0
	// ExitViolation: check found a violation; run found a verdict against
	// its expectation, a rejected trace or a detection regression.
	ExitViolation = 1
	// ExitBadInput: bad flags, a bad history file or a bad plan.
	ExitBadInput = 2
	// ExitUnknown: some verdict unknown (never a pass).
	ExitUnknown = 3
	// ExitEnvironment: run found what it needs missing (redis-server,
	// redis-sentinel, Docker, a free port, datefudge), before running anything.
	ExitEnvironment = 4
	// ExitInterrupted: run was interrupted (Ctrl-C, SIGTERM); what finished
	// is kept, and --resume continues it. 128 + SIGINT, as shells report it.
	ExitInterrupted = 130
)
