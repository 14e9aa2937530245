package runner

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/shardcron/shardcron/scheduler"
)

// Func is an in-process handler. Its ctx carries the run's identity
// (IdentityFrom) and is cancelled the instant the run must stop: on loss of
// the shard or of the safe deadline, on the job's timeout, on replace or
// release. A handler must return promptly when ctx is done: the runner
// cannot stop a goroutine, so Run returns only when the handler does.
type Func func(ctx context.Context) error

// Funcs is a registry of in-process handlers, by name, for programs that
// embed shardcron. A job runs one with `func: NAME`. The zero value is empty
// and ready; safe for concurrent use.
type Funcs struct {
	mu sync.RWMutex
	m  map[string]Func
}

// Register adds fn under name. It fails (ErrFunc) if name is empty, fn is
// nil or name is taken.
func (f *Funcs) Register(name string, fn func(ctx context.Context) error) error {
	if name == "" || fn == nil {
		return fmt.Errorf("%w: register %q: empty name or nil function", ErrFunc, name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[name]; ok {
		return fmt.Errorf("%w: register %q: already registered", ErrFunc, name)
	}
	if f.m == nil {
		f.m = make(map[string]Func)
	}
	f.m[name] = fn
	return nil
}

// Lookup returns the handler registered under name.
func (f *Funcs) Lookup(name string) (Func, bool) {
	if f == nil {
		return nil, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn, ok := f.m[name]
	return fn, ok
}

type identityKey struct{}

// withIdentity returns ctx carrying r.
func withIdentity(ctx context.Context, r scheduler.Run) context.Context {
	return context.WithValue(ctx, identityKey{}, r)
}

// IdentityFrom returns the run whose context ctx is (or derives from): its
// cluster, job, item and tick (the idempotency key), shard, fencing token
// and node.
func IdentityFrom(ctx context.Context) (scheduler.Run, bool) {
	r, ok := ctx.Value(identityKey{}).(scheduler.Run)
	return r, ok
}

// runFunc runs an in-process handler under ctx, which already carries the
// run's deadline watch. A panicking handler fails its run instead of the
// server: library code never lets a job take the process down.
func (rn *Runner) runFunc(ctx context.Context, r scheduler.Run) scheduler.Result {
	fn, ok := rn.cfg.Funcs.Lookup(r.Job.Func)
	if !ok {
		return scheduler.Result{Status: scheduler.StatusFailed,
			Detail: fmt.Sprintf("no in-process handler registered as %q", r.Job.Func)}
	}
	if r.Deadline.Remaining() <= 0 {
		return notStarted(deadlinePassed("not started"))
	}
	err := callFunc(withIdentity(ctx, r), fn)
	if err != nil && ctx.Err() != nil {
		return stopped(ctx, r, "handler returned: "+err.Error())
	}
	if err != nil {
		return scheduler.Result{Status: scheduler.StatusFailed, Detail: err.Error()}
	}
	return scheduler.Result{Status: scheduler.StatusSucceeded, Detail: "ok"}
}

func callFunc(ctx context.Context, fn Func) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx)
}
