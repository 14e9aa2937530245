package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeStore implements the fence and Rev semantics of the shard package's
// Store in memory: a global ModRevision counter, one token per shard, and
// per-write comparisons. It fails the test on unexpected use: a write for a
// shard never granted, a record that does not decode, or a tick claimed
// twice under one token.
type fakeStore struct {
	t        testing.TB
	mu       sync.Mutex
	rev      int64
	fence    map[int]int64
	lost     map[int]context.CancelCauseFunc // ends the Grant on a fence failure
	recs     map[string]Stored               // by shard/job
	claimed  map[string]bool                 // job/tick/token ever claimed
	byShard  map[int]int                     // writes sent, by shard
	hist     map[string][]Entry              // by shard/job: History's entries
	requests map[string]int64                // trigger requests: id -> CreateRevision (consume)
	commits  int
	writes   int
	// claimCommits counts Commit calls that claimed at least one tick.
	claimCommits int
	// inject, when set, decides a write's fate before the comparisons:
	// nil to go on; applied=true to apply it and still return err.
	inject func(w Write) (err error, applied bool)
	// latency, when set, is spent in every Commit call (outside the lock,
	// as concurrent RPCs would), modelling one round trip to etcd.
	latency time.Duration
	// afterCommit, when set, runs after each Commit call (a pause between
	// a claim and the run's start).
	afterCommit func()
	// delay, when set, is spent before a Commit of writes (outside the
	// lock): a slow round trip for chosen writes.
	delay func(writes []Write) time.Duration
	// histInject, when set, fails a history write with the error it returns.
	histInject func(w HistoryWrite) error
}

func newFakeStore(t testing.TB) *fakeStore {
	return &fakeStore{t: t, fence: map[int]int64{}, lost: map[int]context.CancelCauseFunc{},
		recs: map[string]Stored{}, claimed: map[string]bool{}, byShard: map[int]int{}, hist: map[string][]Entry{},
		requests: map[string]int64{}}
}

func recKey(shard int, job string) string { return fmt.Sprintf("%d/%s", shard, job) }

func (f *fakeStore) Commit(ctx context.Context, writes []Write) []WriteResult {
	if f.latency > 0 {
		time.Sleep(f.latency)
	}
	if f.afterCommit != nil {
		defer f.afterCommit()
	}
	if f.delay != nil {
		time.Sleep(f.delay(writes))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range writes {
		// etcd checks each branch of a transaction against --max-txn-ops
		// (128): a write is a put, a fence and a record comparison, and a
		// comparison and a delete per trigger request it consumes.
		if n := 2 + len(w.Triggers); n > 128 {
			f.t.Errorf("write of %s compares %d keys: no transaction can hold it", w.Job, n)
		}
	}
	f.commits++
	f.writes += len(writes)
	out := make([]WriteResult, len(writes))
	claims := 0
	defer func() {
		if claims > 0 {
			f.claimCommits++
		}
	}()
	for i, w := range writes {
		f.byShard[w.Shard]++
		if _, ok := f.fence[w.Shard]; !ok {
			f.t.Errorf("fakeStore: write for shard %d, never granted", w.Shard)
			out[i].Err = ErrShardLost
			continue
		}
		if f.inject != nil {
			if err, applied := f.inject(w); err != nil {
				if applied {
					f.apply(w)
				}
				out[i].Err = err
				continue
			}
		}
		if f.fence[w.Shard] != w.Token {
			out[i].Err = fmt.Errorf("shard %d: %w", w.Shard, ErrShardLost)
			if c := f.lost[w.Shard]; c != nil {
				c(ErrShardLost)
			}
			continue
		}
		if f.recs[recKey(w.Shard, w.Job)].Rev != w.Rev {
			out[i].Err = fmt.Errorf("job %s: %w", w.Job, ErrStale)
			continue
		}
		if out[i].Err = f.consume(w); out[i].Err != nil {
			continue
		}
		if w.Value == nil {
			// A deleted record's claims went with it: a job added again
			// may claim its ticks afresh.
			delete(f.recs, recKey(w.Shard, w.Job))
			prefix := w.Job + "/"
			for k := range f.claimed {
				if strings.HasPrefix(k, prefix) {
					delete(f.claimed, k)
				}
			}
			f.rev++
			continue
		}
		claims += f.newFlights(w)
		out[i].Rev = f.apply(w)
	}
	return out
}

// newFlights counts the ticks w claims.
func (f *fakeStore) newFlights(w Write) int {
	old := f.recs[recKey(w.Shard, w.Job)]
	var before Record
	if old.Value != nil {
		before, _ = DecodeRecord(old.Value)
	}
	r, _ := DecodeRecord(w.Value)
	n := 0
	for _, fl := range r.InFlight {
		if !slices.Contains(before.InFlight, fl) {
			n++
		}
	}
	return n
}

// apply puts w and checks that no tick is claimed twice under one token.
func (f *fakeStore) apply(w Write) int64 {
	old := f.recs[recKey(w.Shard, w.Job)]
	var before Record
	if old.Value != nil {
		before, _ = DecodeRecord(old.Value)
	}
	r, err := DecodeRecord(w.Value)
	if err != nil || r.Token != w.Token {
		f.t.Errorf("fakeStore: bad record for %s: %v %+v", w.Job, err, r)
	}
	for _, fl := range r.InFlight {
		if fl.Token != w.Token || slices.Contains(before.InFlight, fl) {
			continue
		}
		k := fmt.Sprintf("%s/%s/%d", w.Job, fl.Tick.Format(time.RFC3339Nano), fl.Token)
		if f.claimed[k] {
			f.t.Errorf("fakeStore: tick claimed twice under one token: %s", k)
		}
		f.claimed[k] = true
	}
	f.rev++
	f.recs[recKey(w.Shard, w.Job)] = Stored{Value: w.Value, Rev: f.rev}
	return f.rev
}

// AppendHistory implements History: fenced like Commit, keeping keep
// entries per job.
func (f *fakeStore) AppendHistory(_ context.Context, keep int, ws []HistoryWrite) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]error, len(ws))
	for i, w := range ws {
		if f.histInject != nil {
			if errs[i] = f.histInject(w); errs[i] != nil {
				continue
			}
		}
		if f.fence[w.Shard] != w.Token {
			errs[i] = fmt.Errorf("shard %d: %w", w.Shard, ErrShardLost)
			continue
		}
		k := recKey(w.Shard, w.Job)
		h := append(f.hist[k], w.Entries...)
		if n := len(h) - keep; n > 0 {
			h = h[n:]
		}
		f.hist[k] = h
	}
	return errs
}

// Load reads one record under the shard's fence.
func (f *fakeStore) Load(_ context.Context, shard int, token int64, job string) (Stored, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fence[shard] != token {
		return Stored{}, ErrShardLost
	}
	return f.recs[recKey(shard, job)], nil
}

// put stores a record as an earlier owner left it.
func (f *fakeStore) put(shard int, r Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := r.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	f.rev++
	f.recs[recKey(shard, r.Job)] = Stored{Value: b, Rev: f.rev}
}

func (f *fakeStore) record(shard int, job string) Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.recs[recKey(shard, job)]
	var r Record
	if st.Value != nil {
		var err error
		if r, err = DecodeRecord(st.Value); err != nil {
			f.t.Fatal(err)
		}
	}
	// What History holds, so tests read a job's state in one place.
	r.History = slices.Clone(f.hist[recKey(shard, job)])
	return r
}

func (f *fakeStore) shardWrites(shard int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byShard[shard]
}

func (f *fakeStore) exists(shard int, job string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.recs[recKey(shard, job)]
	return ok
}

func (f *fakeStore) counts() (commits, writes, claimCommits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commits, f.writes, f.claimCommits
}

// checkpoint reads a shard's records, as the shard package does on acquire.
func (f *fakeStore) checkpoint(shard int) Checkpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := Checkpoint{Records: map[string]Stored{}}
	prefix := fmt.Sprintf("%d/", shard)
	for k, v := range f.recs {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			cp.Records[k[len(prefix):]] = v
		}
	}
	return cp
}

// fakeDeadline is a safe deadline on the (fake) clock.
type fakeDeadline struct{ until atomic.Int64 }

func newDeadline(d time.Duration) *fakeDeadline {
	fd := &fakeDeadline{}
	fd.until.Store(time.Now().Add(d).UnixNano())
	return fd
}

func (d *fakeDeadline) Remaining() time.Duration { return time.Until(time.Unix(0, d.until.Load())) }

// Deadline is the instant Remaining points at, on the real CLOCK_BOOTTIME
// (a synctest bubble fakes only time.Now): no scheduler test reads it.
func (d *fakeDeadline) Deadline() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano()) + max(d.Remaining(), 0)
}

// fakeContact is the node's contact with the store: in contact (age 0)
// unless a test says how stale it is (lose, or set).
type fakeContact struct {
	lostAt atomic.Int64
	// expectAt is when the last Expect said a run may start (Unix
	// nanoseconds), expectIn its argument; tells counts the calls.
	expectAt, expectIn, tells atomic.Int64
}

// inContact is a Contact that never goes stale.
var inContact = &fakeContact{}

// lose makes the contact go stale from now on; regain ends that.
func (c *fakeContact) lose()   { c.lostAt.Store(time.Now().UnixNano()) }
func (c *fakeContact) regain() { c.lostAt.Store(0) }

func (c *fakeContact) Expect(d time.Duration) {
	c.expectAt.Store(time.Now().Add(d).UnixNano())
	c.expectIn.Store(int64(d))
	c.tells.Add(1)
}

func (c *fakeContact) ContactAge() time.Duration {
	if at := c.lostAt.Load(); at != 0 {
		return time.Since(time.Unix(0, at))
	}
	return 0
}

// runRec is one call of the fake runner.
type runRec struct {
	Run
	start, end time.Time
	cause      error
	res        Result
}

// fakeRunner records every run; behave decides what a run does (default:
// succeed at once). grace is its KillGrace.
type fakeRunner struct {
	mu     sync.Mutex
	runs   []runRec
	active atomic.Int32
	peak   atomic.Int32 // most runs at once
	behave func(ctx context.Context, r Run) Result
	grace  time.Duration
}

func (f *fakeRunner) KillGrace() time.Duration { return f.grace }

func (f *fakeRunner) Run(ctx context.Context, r Run) Result {
	if n := f.active.Add(1); n > f.peak.Load() {
		f.peak.Store(n)
	}
	defer f.active.Add(-1)
	start := time.Now()
	res := Result{Status: StatusSucceeded}
	if f.behave != nil {
		res = f.behave(ctx, r)
	}
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	f.mu.Lock()
	f.runs = append(f.runs, runRec{Run: r, start: start, end: time.Now(), cause: cause, res: res})
	f.mu.Unlock()
	return res
}

func (f *fakeRunner) all() []runRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs)
}

func (f *fakeRunner) of(job string) []runRec {
	var out []runRec
	for _, r := range f.all() {
		if r.Job.Name == job {
			out = append(out, r)
		}
	}
	return out
}

// work returns a behaviour that takes d per run, or until cancelled.
func work(d time.Duration) func(ctx context.Context, r Run) Result {
	return func(ctx context.Context, r Run) Result {
		select {
		case <-time.After(d):
			return Result{Status: StatusSucceeded}
		case <-ctx.Done():
			return Result{Status: StatusCancelled, Detail: context.Cause(ctx).Error()}
		}
	}
}
