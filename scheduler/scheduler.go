package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Causes of an orderly cancellation of a run (the runner sends SIGTERM,
// then SIGKILL after its grace period).
var (
	errReplaced     = errors.New("scheduler: replaced by a newer tick (concurrency replace)")
	errJobRemoved   = errors.New("scheduler: job removed from the job set")
	errDrainTimeout = errors.New("scheduler: drain timeout: run cancelled for release")
	errStopped      = errors.New("scheduler: scheduler stopped")
)

// Scheduler fires the ticks of the jobs whose shards this node owns. Create
// it with New and drive it with Run.
type Scheduler struct {
	cfg    Config
	log    *slog.Logger
	store  Store
	runner Runner
	m      *metrics

	// Shared with other goroutines.
	setMu       sync.Mutex            // serialises SetJobs
	table       atomic.Pointer[table] // the newest job set
	jobsChanged chan struct{}         // buffered 1; SetJobs signals Run
	owned       []atomic.Bool         // by shard; for Jobs()
	reqs        chan request          // Acquired and Drain hand to Run; never closed
	events      chan event            // what Run's goroutines and Triggered report; never closed
	quit        chan struct{}         // closed by Run when its loop has ended
	started     atomic.Bool

	// Owned by Run's goroutine.
	ctx    context.Context // Run's; bounds Store calls
	cur    *table
	shards map[int]*ownedShard      // the current entry per shard
	all    map[*ownedShard]struct{} // every shard entry not yet idle
	timers tickHeap                 // claims ahead, due ticks, retries
	gap    gapMemo                  // the latest answer of a job's schedule (memoFor)
	// voided estimates the timers left for shards, jobs or writes that no
	// longer need them; past half the heap they are dropped (compactTimers).
	voided int
	// claimsDue holds claims ahead taken off timers, until the runs due
	// at the same instant have started (fireDueTicks, claimDue).
	claimsDue []timerEntry
	waiting   waitHeap        // due ticks not yet running
	unstarted []unstartedRun  // claimed runs not handed to a worker yet (handOff)
	heldAt    time.Time       // when runs held for contact look again; zero if none
	contacts  map[Contact]int // the owned shards' contacts, each with its shards (expect.go)
	expected  expectation     // what contacts were last told
	// openAhead holds, per job, the latest tick claimAhead left unclaimed
	// because an earlier one was undecided: claimed ahead after all if
	// every earlier tick is decided before it comes due (claimOpenAhead).
	openAhead map[*jobRec]*waitTick
	used      int                  // run slots taken (due claims pending + runs)
	dirty     map[*jobRec]struct{} // records with queued ops
	flushNow  bool                 // a run waits for a dirty record's write
	flushAt   time.Time            // when dirty records are sent at the latest
	retrying  map[*jobRec]struct{} // records whose write (activity.writing) waits for a retry
	// slowCommit is a decaying maximum of recent commit latencies; the
	// claim horizon grows with it.
	slowCommit time.Duration
	slowAt     time.Time             // when slowCommit was last updated
	jnl        journalState          // the completion journal's write side (journalwrite.go)
	histDirty  map[*jobRec]struct{}  // records with history to hand on
	claimLog   failLog               // record writes whose outcome is unknown, by batch
	histLog    failLog               // history writes that failed, by flush
	histAt     time.Time             // the next history flush; zero if none
	sending    map[noteKey]*noteSend // notifications being sent or awaiting their confirmation's write (notify.go)
	// batchLimit caps the writes per Commit call (0: commitWrites).
	// Benchmarks set 1 to measure claims without batching.
	batchLimit int
	wg         sync.WaitGroup // every goroutine Run starts (wg.Go); joined by shutdown
	workers    *workers       // where runs, commits and history writes go (on wg)
}

// New returns a Scheduler; cfg's zero fields take their defaults.
func New(cfg Config, store Store, runner Runner) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || runner == nil {
		return nil, fmt.Errorf("%w: nil Store or Runner", ErrInvalidConfig)
	}
	m, err := newMetrics(cfg.Registerer, cfg.MaxConcurrentRuns)
	if err != nil {
		return nil, fmt.Errorf("scheduler: metrics: %w", err)
	}
	s := &Scheduler{
		cfg:         cfg,
		log:         cfg.Logger.With("cluster", cfg.Cluster, "node", cfg.Node),
		store:       store,
		runner:      runner,
		m:           m,
		jobsChanged: make(chan struct{}, 1),
		owned:       make([]atomic.Bool, cfg.Shards),
		reqs:        make(chan request),
		events:      make(chan event, 64),
		quit:        make(chan struct{}),
		shards:      make(map[int]*ownedShard),
		all:         make(map[*ownedShard]struct{}),
		contacts:    make(map[Contact]int),
		dirty:       make(map[*jobRec]struct{}),
		retrying:    make(map[*jobRec]struct{}),
		openAhead:   make(map[*jobRec]*waitTick),
		histDirty:   make(map[*jobRec]struct{}),
		sending:     make(map[noteKey]*noteSend),
		claimLog:    failLog{msg: "record write outcome unknown; retrying"},
		histLog:     failLog{msg: "run history not written"},
	}
	s.workers = newWorkers(&s.wg, s.quit)
	return s, nil
}

// maxKeptRoom is the room (capacity) an emptied line of waiting ticks
// keeps. The sets and lines Run works through (dirty, histDirty, waiting)
// are made anew once empty, since a Go map never gives back its room and a
// slice keeps its capacity: the room of one busy instant (a catch-up that
// touched every job of the owned shards) would otherwise be kept for good.
const maxKeptRoom = 1024

// maxSleep bounds how long the loop sleeps without reading the wall clock.
const maxSleep = time.Minute

// Run owns the scheduler's state until ctx is done; then it cancels every
// run (an orderly cancel: such runs stay in flight for the successor) and
// returns once every goroutine it started has ended. It may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	s.ctx = ctx
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.now()
		s.step(now)
		s.m.slotsUsed.Set(float64(s.used))
		s.m.waiting.Set(float64(len(s.waiting)))
		s.expectRuns(now)
		if w, ok := s.nextWake(now); ok {
			// Timers run on the monotonic clock and ticks on the wall
			// clock: re-read the wall clock at least every maxSleep, so a
			// step of it (NTP, a resumed VM) delays a tick by at most that.
			timer.Reset(min(max(w.Sub(s.now()), 0), maxSleep))
		} else {
			timer.Reset(maxSleep)
		}
		select {
		case <-ctx.Done():
			s.shutdown()
			return nil
		case r := <-s.reqs:
			r.serve(s)
		case ev := <-s.events:
			ev.apply(s)
			// Take what else has arrived, so its writes share one Commit.
			for more := true; more; {
				select {
				case ev := <-s.events:
					ev.apply(s)
				default:
					more = false
				}
			}
		case <-s.jobsChanged:
			s.installJobs(s.now())
		case <-timer.C:
		}
	}
}

// request is a call of Acquired or Drain (or a drain's cut), handed to
// Run, which serves it on its own goroutine. The set is closed; these are
// all of it.
type request interface{ serve(s *Scheduler) }

func (r acquireReq) serve(s *Scheduler) {
	s.acquire(r.g, s.now())
	close(r.done)
}

func (r drainReq) serve(s *Scheduler) { r.reply <- s.drain(r.shard, s.now()) }

func (r cutReq) serve(*Scheduler) { r.sh.cancel(r.cause) }

// event is what a goroutine Run started, or Triggered, reports back to it;
// Run applies it on its own goroutine. The set is closed; these are all of it.
type event interface{ apply(s *Scheduler) }

func (ev lostEvent) apply(s *Scheduler)    { s.stopShard(ev.sh, context.Cause(ev.sh.g.Lost)) }
func (ev runDone) apply(s *Scheduler)      { s.runEnded(ev) }
func (ev commitDone) apply(s *Scheduler)   { s.committed(ev, s.now()) }
func (ev loadDone) apply(s *Scheduler)     { s.loaded(ev) }
func (ev historyDone) apply(s *Scheduler)  { s.historyWritten(ev) }
func (ev triggerEvent) apply(s *Scheduler) { s.triggered(ev.t, s.now()) }
func (ev heldEvent) apply(s *Scheduler)    { s.unstarted = append(s.unstarted, unstartedRun{r: ev.r}) }

// step does what is due at now: claims ahead, fires due ticks, retries
// writes, dispatches waiting ticks and sends the writes that are due.
func (s *Scheduler) step(now time.Time) {
	if s.cur == nil && s.table.Load() != nil {
		s.installJobs(now)
	}
	s.fireDueTicks(now)
	s.dispatch(now)
	s.claimDue(now)
	if s.flushNow || (!s.flushAt.IsZero() && !now.Before(s.flushAt)) {
		s.flush()
	}
	if due, _ := s.histDue(now); due {
		s.flushHistory(nil)
	}
	s.flushJournal(now)
	s.handOff(now)
}

// nextWake is when step, which ran at now, has something to do next.
func (s *Scheduler) nextWake(now time.Time) (time.Time, bool) {
	var w time.Time
	ok := false
	take := func(t time.Time) {
		if !t.IsZero() && (!ok || t.Before(w)) {
			w, ok = t, true
		}
	}
	if len(s.timers) > 0 {
		take(s.timers[0].at)
	}
	if len(s.waiting) > 0 && s.used < s.cfg.MaxConcurrentRuns {
		take(s.waiting[0].w.tick)
	}
	take(s.flushAt)
	take(s.heldAt)
	take(s.journalAt())
	if _, at := s.histDue(now); !at.IsZero() {
		take(at)
	}
	return w, ok
}

// shutdown cancels every shard's runs and joins every goroutine.
func (s *Scheduler) shutdown() {
	for sh := range s.all {
		sh.cancel(errStopped)
		s.owned[sh.g.Shard].Store(false)
		s.stopWatch(sh)
	}
	close(s.quit)
	s.wg.Wait()
	s.log.Info("scheduler stopped")
}

// now reads the wall clock the scheduler judges ticks by (Config.Clock).
func (s *Scheduler) now() time.Time { return s.cfg.Clock() }

// send delivers an event to Run, or drops it once Run has ended.
func (s *Scheduler) send(ev event) {
	select {
	case s.events <- ev:
	case <-s.quit:
	}
}
