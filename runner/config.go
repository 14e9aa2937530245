package runner

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults.
const (
	DefaultMaxOutputBytes   = 64 << 10
	DefaultMaxResponseBytes = 64 << 10
	DefaultKillGrace        = 5 * time.Second
	DefaultExtendEvery      = 100 * time.Millisecond
	// DefaultIdleConnsPerHost matches the server's default
	// --max-concurrent-runs: a burst of runs against one receiver then
	// reuses its connections instead of dialling most of them anew.
	DefaultIdleConnsPerHost = 64
)

// Config configures a Runner. Start from DefaultConfig.
type Config struct {
	// ClientTimeout bounds every HTTP request as a whole (connect, send,
	// response, body), on top of the job's own timeout. Zero: no bound
	// beyond the job's timeout and the run's context.
	ClientTimeout time.Duration

	// MaxOutputBytes bounds the output (stdout and stderr together) of an
	// exec job kept in Result.Output. The rest is read and dropped; a marker
	// says how much. Default 64 KiB.
	MaxOutputBytes int

	// IdleConnsPerHost is how many idle keep-alive connections to one
	// receiver the HTTP client keeps between runs. Jobs are often due at the
	// same second against the same receiver; with fewer idle connections
	// than concurrent runs, every burst dials (and the receiver accepts) the
	// difference again, which cost 15% of a replica's CPU at 1,000 fires/s.
	// Set it to the replica's run slots. Default 64.
	IdleConnsPerHost int

	// MaxResponseBytes bounds the HTTP response body kept in Result.Output,
	// with the same marker. Default 64 KiB.
	MaxResponseBytes int

	// KillGrace is how long an orderly cancel (timeout, replace, release)
	// waits after SIGTERM before SIGKILL. Loss of the shard or of the safe
	// deadline never waits. Default 5s.
	KillGrace time.Duration

	// ExtendEvery is how often the replica extends an exec job's allowance
	// with its supervisor (and checks the safe deadline for the other
	// kinds). Each extension reaches exactly to the safe deadline, never
	// beyond, so this only bounds how fresh the supervisor's view is.
	// Default 100ms; at most 250ms.
	ExtendEvery time.Duration

	// Supervisor is the argv prefix that starts the supervisor of exec jobs:
	// this binary and its hidden subcommand, as SupervisorArgv returns. The
	// subcommand must call SuperviseMain. Empty: exec jobs fail with
	// ErrNoSupervisor (a program that embeds only in-process handlers).
	Supervisor []string

	// Exec is this replica's own exec policy (--exec, --exec-allow,
	// --exec-env-allow), enforced on every exec run whatever the job set
	// says. New resolves its allow-list with the server's PATH and fails
	// when an entry does not name an executable file or a directory. Zero:
	// every program, any env but PATH.
	Exec ExecPolicy

	// Egress says which addresses http jobs may connect to (--egress-deny,
	// --egress-allow), checked on the resolved address of every
	// connection. Zero: everything but DefaultEgressDeny.
	Egress EgressPolicy

	// Funcs holds the in-process handlers that func jobs name. Nil: func
	// jobs fail as unknown.
	Funcs *Funcs

	// Env looks up the server's environment for ${SHARDCRON_JOB_*}
	// references and for the PATH and HOME an exec job gets. Default
	// os.LookupEnv.
	Env func(string) (string, bool)

	// Logger receives warnings about supervisors that misbehave. Default:
	// discard.
	Logger *slog.Logger

	// Registerer, when not nil, receives the runner's metrics
	// (shardcron_runner_output_truncated_total).
	Registerer prometheus.Registerer
}

// DefaultConfig returns a Config with every default filled in and no
// Supervisor.
func DefaultConfig() Config {
	return Config{
		MaxOutputBytes:   DefaultMaxOutputBytes,
		MaxResponseBytes: DefaultMaxResponseBytes,
		IdleConnsPerHost: DefaultIdleConnsPerHost,
		KillGrace:        DefaultKillGrace,
		ExtendEvery:      DefaultExtendEvery,
		Env:              os.LookupEnv,
		Logger:           slog.New(slog.DiscardHandler),
	}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = d.MaxOutputBytes
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = d.MaxResponseBytes
	}
	if c.IdleConnsPerHost == 0 {
		c.IdleConnsPerHost = d.IdleConnsPerHost
	}
	if c.KillGrace == 0 {
		c.KillGrace = d.KillGrace
	}
	if c.ExtendEvery == 0 {
		c.ExtendEvery = d.ExtendEvery
	}
	if c.Env == nil {
		c.Env = d.Env
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate reports the first field out of range. Zero values stand for
// their defaults and are valid.
func (c Config) Validate() error {
	switch {
	case c.ClientTimeout < 0:
		return fmt.Errorf("%w: ClientTimeout %v is negative", ErrInvalidConfig, c.ClientTimeout)
	case c.MaxOutputBytes < 0:
		return fmt.Errorf("%w: MaxOutputBytes %d is negative", ErrInvalidConfig, c.MaxOutputBytes)
	case c.MaxResponseBytes < 0:
		return fmt.Errorf("%w: MaxResponseBytes %d is negative", ErrInvalidConfig, c.MaxResponseBytes)
	case c.IdleConnsPerHost < 0:
		return fmt.Errorf("%w: IdleConnsPerHost %d is negative", ErrInvalidConfig, c.IdleConnsPerHost)
	case c.KillGrace < 0:
		return fmt.Errorf("%w: KillGrace %v is negative", ErrInvalidConfig, c.KillGrace)
	case c.ExtendEvery < 0 || c.ExtendEvery > 250*time.Millisecond:
		return fmt.Errorf("%w: ExtendEvery %v is outside (0, 250ms]", ErrInvalidConfig, c.ExtendEvery)
	}
	for _, p := range append(slices.Clip(c.Egress.Deny), c.Egress.Allow...) {
		if !p.IsValid() {
			return fmt.Errorf("%w: Egress has an invalid network %v", ErrInvalidConfig, p)
		}
	}
	if len(c.Supervisor) > 0 && c.Supervisor[0] == "" {
		return fmt.Errorf("%w: Supervisor has an empty program name", ErrInvalidConfig)
	}
	return nil
}
