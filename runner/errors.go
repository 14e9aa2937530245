package runner

import "errors"

// Errors the runner reports. Run never returns an error (it reports a
// scheduler.Result); these appear in New, Validate and Register, wrapped
// in log records, and (ErrExecRefused, ErrEgressRefused,
// ErrRedirectRefused) in a refused run's Detail.
var (
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("runner: invalid config")
	// ErrClosed: the Runner was closed.
	ErrClosed = errors.New("runner: closed")
	// ErrFunc: an in-process handler name is empty, unknown or taken.
	ErrFunc = errors.New("runner: func")
	// ErrNoSupervisor: an exec job was run without Config.Supervisor.
	ErrNoSupervisor = errors.New("runner: no supervisor configured for exec jobs")
	// ErrExecRefused: an exec job's program or env is not allowed on this
	// replica.
	ErrExecRefused = errors.New("runner: exec refused by this replica's policy")
	// ErrEgressRefused: an http job's connection would reach an address
	// the replica's egress rules deny.
	ErrEgressRefused = errors.New("runner: egress refused")
	// ErrRedirectRefused: an http job's redirect is not followed (another
	// host under follow_redirects: same_host, or https to http).
	ErrRedirectRefused = errors.New("runner: redirect refused")
)
