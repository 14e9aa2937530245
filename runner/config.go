package runner

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"os"
	"time"
)

// Errors the runner reports. Run never returns an error (it reports a
// scheduler.Result); these appear in New, Validate and Register, and wrapped
// in log records.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("runner: invalid config")
	// ErrClosed: the Runner was closed.
	ErrClosed = errors.New("runner: closed")
	// ErrFunc: an in-process handler name is empty, unknown or taken.
	ErrFunc = errors.New("runner: func")
	// ErrNoSupervisor: an exec job was run without Config.Supervisor.
	ErrNoSupervisor = errors.New("runner: no supervisor configured for exec jobs")
	// ErrNoDeadlineInstant: an exec job's run carries a Deadline that is not
	// a scheduler.DeadlineAt. The supervisor needs the safe deadline as an
	// instant; one derived from Remaining() could be stretched by a stall.
	ErrNoDeadlineInstant = errors.New("runner: exec needs the safe deadline as an instant (scheduler.DeadlineAt)")
)

// Defaults.
const (
	DefaultMaxOutputBytes   = 64 << 10
	DefaultMaxResponseBytes = 64 << 10
	DefaultKillGrace        = 5 * time.Second
	DefaultExtendEvery      = 100 * time.Millisecond
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

	// Funcs holds the in-process handlers that func jobs name. Nil: func
	// jobs fail as unknown.
	Funcs *Funcs

	// Env looks up the server's environment for ${SHARDCRON_JOB_*}
	// references and for the PATH and HOME an exec job gets. Default
	// os.LookupEnv.
	Env func(string) (string, bool)

	// Logger receives warnings about supervisors that misbehave. Default
	// slog.Default().
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
		KillGrace:        DefaultKillGrace,
		ExtendEvery:      DefaultExtendEvery,
		Env:              os.LookupEnv,
		Logger:           slog.Default(),
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
		return fmt.Errorf("%w: ClientTimeout %v is negative", ErrConfig, c.ClientTimeout)
	case c.MaxOutputBytes < 0:
		return fmt.Errorf("%w: MaxOutputBytes %d is negative", ErrConfig, c.MaxOutputBytes)
	case c.MaxResponseBytes < 0:
		return fmt.Errorf("%w: MaxResponseBytes %d is negative", ErrConfig, c.MaxResponseBytes)
	case c.KillGrace < 0:
		return fmt.Errorf("%w: KillGrace %v is negative", ErrConfig, c.KillGrace)
	case c.ExtendEvery < 0 || c.ExtendEvery > 250*time.Millisecond:
		return fmt.Errorf("%w: ExtendEvery %v is outside (0, 250ms]", ErrConfig, c.ExtendEvery)
	}
	if len(c.Supervisor) > 0 && c.Supervisor[0] == "" {
		return fmt.Errorf("%w: Supervisor has an empty program name", ErrConfig)
	}
	return nil
}
