package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// Runner runs jobs; it implements scheduler.Runner. Safe for concurrent use.
type Runner struct {
	cfg    Config
	exec   execPolicy // cfg.Exec, resolved
	met    *metrics   // nil without a Registerer
	client *http.Client
	tr     *http.Transport

	// closing is cancelled (cause ErrClosed) by Close; every run's context
	// follows it.
	closing   context.Context
	closeRuns context.CancelCauseFunc

	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup // one per Run in progress; Close waits

	// started, when set (tests), is called with the supervisor's and the
	// job's pid once an exec job has started.
	started func(supervisor, job int)
}

var _ scheduler.Runner = (*Runner)(nil)

// New returns a Runner for cfg, whose zero fields take their defaults.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Supervisor = append([]string(nil), cfg.Supervisor...)
	// The allow-list is resolved once, with the server's PATH: a program
	// installed or replaced later in a listed directory is found at run
	// time, a name is pinned to the file it named at start.
	policy, err := cfg.Exec.resolve(valueOr(cfg.Env, "PATH", defaultPath))
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = cfg.Egress.dialer().DialContext
	// Jobs of one cluster often call the same few receivers at the same
	// second: keep enough idle connections that each run reuses one.
	tr.MaxIdleConnsPerHost = cfg.IdleConnsPerHost
	tr.MaxIdleConns = 0 // no bound across hosts beyond the per-host one
	rn := &Runner{
		exec:   policy,
		met:    met,
		cfg:    cfg,
		tr:     tr,
		client: &http.Client{Transport: tr, Timeout: cfg.ClientTimeout, CheckRedirect: checkRedirect},
	}
	rn.closing, rn.closeRuns = context.WithCancelCause(context.Background())
	return rn, nil
}

// Run runs one tick of r.Job and returns when its work has ended: the
// request finished or abandoned, the process group dead, the handler
// returned. ctx is the run's context (the scheduler cancels it on replace,
// release or loss; its cause says which); Run adds the job's timeout.
func (rn *Runner) Run(ctx context.Context, r scheduler.Run) scheduler.Result {
	if !rn.enter() {
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "runner closed; not started", NotStarted: true}
	}
	defer rn.runs.Done()
	if r.Deadline == nil {
		return scheduler.Result{Status: scheduler.StatusFailed, Detail: "run has no safe deadline; not started"}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(rn.closing, func() { cancel(ErrClosed) })
	defer stop()
	// The job's timeout is the scheduler's (scheduler.ErrTimeout, across
	// every attempt): the runner only reports it.
	res := rn.run(ctx, cancel, r)
	if !r.Job.Keeps() {
		res.Output = "" // keep_output: false
	}
	return res
}

// run runs r by its kind, under ctx (which cancel ends).
func (rn *Runner) run(ctx context.Context, cancel context.CancelCauseFunc, r scheduler.Run) scheduler.Result {
	switch {
	case r.Job.Exec != nil:
		return rn.runExec(ctx, r)
	case r.Job.HTTP != nil:
		defer rn.watchDeadline(ctx, cancel, r.Deadline)()
		return rn.runHTTP(ctx, r)
	case r.Job.Func != "":
		defer rn.watchDeadline(ctx, cancel, r.Deadline)()
		return rn.runFunc(ctx, r)
	}
	return scheduler.Result{Status: scheduler.StatusFailed, Detail: "job has no http, exec or func target"}
}

// enter registers a run unless the Runner is closed.
func (rn *Runner) enter() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.closed {
		return false
	}
	rn.runs.Add(1)
	return true
}

// KillGrace is the wait between SIGTERM and SIGKILL of an orderly stop
// (Config.KillGrace); the scheduler cancels a drain's runs this long before
// the drain's deadline.
func (rn *Runner) KillGrace() time.Duration { return rn.cfg.KillGrace }

// Close stops every run in progress in an orderly way (SIGTERM, then
// SIGKILL after KillGrace), waits for them, and drops idle connections.
// Runs started after Close are refused. Idempotent; every call waits.
func (rn *Runner) Close() error {
	rn.mu.Lock()
	rn.closed = true
	rn.mu.Unlock()
	rn.closeRuns(ErrClosed)
	rn.runs.Wait()
	rn.tr.CloseIdleConnections()
	return nil
}

// watchDeadline cancels ctx with scheduler.ErrDeadline as soon as the safe
// deadline has passed, in case the scheduler's own loss signal is late. It
// re-reads the deadline every ExtendEvery (a timer on the monotonic clock
// alone could oversleep a host suspend) from a timer callback, not a
// goroutine: most runs end before the first check. It returns the function
// that stops the watch.
func (rn *Runner) watchDeadline(ctx context.Context, cancel context.CancelCauseFunc, d scheduler.Deadline) func() {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case stopped || ctx.Err() != nil:
		case d.Remaining() <= 0:
			cancel(scheduler.ErrDeadline)
		default:
			t.Reset(rn.cfg.ExtendEvery)
		}
	}
	mu.Lock()
	t = time.AfterFunc(rn.cfg.ExtendEvery, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// killAtOnce says how work under ctx must stop now that ctx is done: at once
// on loss, in order otherwise.
func killAtOnce(ctx context.Context) bool {
	c := context.Cause(ctx)
	return errors.Is(c, scheduler.ErrShardLost) || errors.Is(c, scheduler.ErrDeadline)
}

// stopBy reports the instant an orderly stop must be over by, when ctx's
// cause names one (a release whose drain timeout is running out).
func stopBy(ctx context.Context) (time.Time, bool) {
	var sb *scheduler.StopBy
	if errors.As(context.Cause(ctx), &sb) {
		return sb.At, true
	}
	return time.Time{}, false
}

// stopped is the Result of work that ctx stopped; what says what happened
// to the work ("request abandoned", "process group killed").
func stopped(ctx context.Context, r scheduler.Run, what string) scheduler.Result {
	c := context.Cause(ctx)
	switch {
	case errors.Is(c, scheduler.ErrShardLost):
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "shard lost: " + what}
	case errors.Is(c, scheduler.ErrDeadline):
		return deadlinePassed(what)
	case errors.Is(c, scheduler.ErrTimeout):
		return scheduler.Result{Status: scheduler.StatusTimedOut,
			Detail: fmt.Sprintf("timeout after %v: %s", r.Job.Timeout.D(), what)}
	case errors.Is(c, context.DeadlineExceeded):
		return scheduler.Result{Status: scheduler.StatusTimedOut, Detail: "timeout: " + what}
	case errors.Is(c, ErrClosed):
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "runner closed: " + what}
	case c == nil || errors.Is(c, context.Canceled):
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "cancelled: " + what}
	}
	return scheduler.Result{Status: scheduler.StatusCancelled, Detail: fmt.Sprintf("cancelled (%v): %s", c, what)}
}

// notStarted marks the result of a run turned away before any of its work
// began (scheduler.Result.NotStarted): a release may name it never started.
func notStarted(res scheduler.Result) scheduler.Result {
	res.NotStarted = true
	return res
}

func deadlinePassed(what string) scheduler.Result {
	return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "safe deadline passed: " + what}
}
