package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shardcron/shardcron/jobstore"
)

// errNoJobSet: the replica has not read a usable job set yet.
var errNoJobSet = errors.New("no job set read yet: the cluster's job set is unreadable (see the log: bad data in etcd) or etcd does not answer")

// firstSet holds a replica back from taking shards until it has read a
// job set. A replica that took shards without one would own their jobs and
// fire none of them: with the cluster's job set unreadable (damaged, or in
// a newer format), a restarted replica instead stays out, not ready, so a
// rolling restart stalls on its readiness rather than handing shards to
// replicas that run nothing; the replicas still running keep their last
// good set.
type firstSet struct {
	once   sync.Once
	loaded chan struct{} // closed at the first job set; never reopened
}

func newFirstSet() *firstSet { return &firstSet{loaded: make(chan struct{})} }

// follow wraps the job set's consumer: the first set opens the gate.
func (f *firstSet) follow(next func(jobstore.Held)) func(jobstore.Held) {
	return func(set jobstore.Held) {
		next(set)
		f.once.Do(func() { close(f.loaded) })
	}
}

// run calls fn once the first job set has arrived; if ctx ends before, it
// returns nil without calling fn (there is nothing to leave).
func (f *firstSet) run(ctx context.Context, fn func(context.Context) error) error {
	select {
	case <-f.loaded:
		return fn(ctx)
	case <-ctx.Done():
		return nil
	}
}

// ready is ready, refusing until the first job set has arrived.
func (f *firstSet) ready(ready func() error) func() error {
	return func() error {
		select {
		case <-f.loaded:
			return ready()
		default:
			return errNoJobSet
		}
	}
}

// metaRetry is how often a replica held back by a cluster meta it refuses
// reads it again.
const metaRetry = 5 * time.Second

// startStatus is what a starting replica waits for, for /readyz and the
// other paths until it is wired.
type startStatus struct {
	mu  sync.Mutex
	why string
}

// set records why the replica is still starting ("" once it is past it)
// and reports whether that changed.
func (s *startStatus) set(why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := s.why != why
	s.why = why
	return changed
}

func (s *startStatus) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == "" {
		return "waiting for etcd"
	}
	return s.why
}
