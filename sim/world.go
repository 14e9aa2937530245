package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// world is one simulation: the nodes, the store model, the receiver.
type world struct {
	cfg     Config
	seed    uint64
	maxSkew time.Duration // the largest clock step of any owner (History.Skew)
	rng     *rand.Rand
	irng    *rand.Rand // Config.Interrupts' own stream
	m       *model
	start   time.Time
	nodes   []*node
	jobs    *jobsState
	nem     *nemesis

	events []Event

	// mu guards what the port goroutines touch.
	mu      sync.Mutex
	fresh   []*call   // registered, not yet seen by the sim
	calls   []*call   // seen, not yet answered
	runs    []*runRec // every run, in the order the sim saw them
	newRuns []*runRec
	// refusing: the runner's refusals not yet let return (ackOne).
	refusing []*runRec
	// refused: the calls the runner turned away (past the safe deadline,
	// node stopped); the owner counted each as running meanwhile.
	refused []Run
	drains  []drainDone
	kick    chan struct{} // buffered 1: something was registered
	nextID  int64

	acquireAt map[int]time.Time // free shard -> when an acquisition is tried
	// stallUntil: the store answers nothing and revokes no lease before it
	// (an etcd stall); its leases' time runs on.
	stallUntil time.Time
	rehandAt   time.Time
	triggers   map[string]trigInfo
	faults     []Fault // what the nemesis did, for the checker
}

type trigInfo struct {
	job string
	at  time.Time
}

// node is one replica: a name, and its current incarnation.
type node struct {
	name   string
	inc    int
	alive  bool
	sched  *scheduler.Scheduler
	cancel context.CancelFunc
	done   chan struct{}
	sess   *session
	held   map[int]*holding
	// Faults.
	restartAt   time.Time
	crashAt     time.Time // a crash the nemesis aimed just after a journal write (nemesis.journaled)
	partUntil   time.Time
	partFail    bool // partitioned calls fail after a while instead of hanging
	pausedUntil time.Time
	resume      chan struct{} // closed when a pause ends
	// skew is how far the node's wall clock (scheduler.Config.Clock) is
	// off, in nanoseconds: stepped by the nemesis, kept across restarts
	// (a host's clock outlives the process), zeroed when faults heal.
	skew atomic.Int64
}

// stepClock steps n's wall clock to d off the true time.
func (w *world) stepClock(n *node, d time.Duration) {
	n.skew.Store(int64(d))
	w.maxSkew = max(w.maxSkew, d, -d)
}

// holding is a shard a node holds: its Grant's state.
type holding struct {
	shard    int
	gen      int64
	sess     *session
	lost     context.Context
	cancel   context.CancelCauseFunc
	draining bool
}

type drainDone struct {
	n   *node
	inc int
	h   *holding
	rel scheduler.Released // what Drain returned
}

func (n *node) connected(now time.Time) bool {
	return n.alive && !now.Before(n.partUntil) && !n.paused(now)
}

func (n *node) paused(now time.Time) bool { return now.Before(n.pausedUntil) }

// reaches reports whether n's requests reach the store and are answered:
// n is connected and the store is not stalled.
func (w *world) reaches(n *node, now time.Time) bool {
	return n.connected(now) && !now.Before(w.stallUntil)
}

func (w *world) note(node string, shard int, job, what string) {
	ev := Event{At: time.Now(), Node: node, Shard: shard, Job: job, What: what}
	w.events = append(w.events, ev)
	if w.cfg.Log != nil {
		fmt.Fprintln(w.cfg.Log, ev)
	}
}

// simulate runs one seed inside the calling synctest bubble and returns
// its history.
func simulate(seed uint64, cfg Config) *History {
	w := &world{cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), irng: rand.New(rand.NewPCG(seed, seed^0x1e7e)), start: time.Now(),
		kick: make(chan struct{}, 1), acquireAt: map[int]time.Time{}, triggers: map[string]trigInfo{}}
	w.m = newModel(cfg.TTL, w.note)
	w.jobs = newJobs(w)
	w.nem = newNemesis(w)
	for i := range cfg.Nodes {
		n := &node{name: fmt.Sprintf("n%d", i+1)}
		w.nodes = append(w.nodes, n)
		w.startNode(n)
	}
	w.loop(w.start.Add(cfg.Duration + cfg.Quiet))
	for _, n := range w.nodes {
		if n.alive {
			w.stopNode(n, "end of simulation")
		}
	}
	w.settle()
	return w.history()
}

// settle answers what the stopped nodes still wait for until every
// goroutine of theirs has ended.
func (w *world) settle() {
	for {
		synctest.Wait()
		w.absorb(time.Now())
		if w.ackOne() || w.answerDead() {
			continue
		}
		all := true
		for _, n := range w.nodes {
			select {
			case <-n.done:
			default:
				all = false
			}
		}
		if all {
			return
		}
		time.Sleep(time.Second)
	}
}

// startNode starts a new incarnation of n: a new session and Scheduler.
func (w *world) startNode(n *node) {
	now := time.Now()
	w.mu.Lock()
	n.inc++
	n.alive, n.held = true, map[int]*holding{}
	w.mu.Unlock()
	n.restartAt = time.Time{}
	cfg := scheduler.DefaultConfig()
	cfg.Cluster, cfg.Node, cfg.Shards = "sim", n.name, w.cfg.Shards
	cfg.HistoryFlush = 2 * time.Second
	cfg.MaxConcurrentRuns = w.cfg.Slots
	cfg.Journal = nodeJournal{w, n, n.inc}
	cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(n.skew.Load())) }
	if w.cfg.Log != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(w.cfg.Log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := scheduler.New(cfg, nodeStore{w, n, n.inc}, simRunner{w, n, n.inc})
	if err != nil {
		panic(err) // the sim's own configuration: a bug in the sim
	}
	w.mu.Lock()
	n.sched = s
	n.sess = nil // the crashed incarnation's lease stays in the store until it expires
	w.mu.Unlock()
	s.SetJobs(w.jobs.set)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	done := n.done
	go func() { _ = s.Run(ctx); close(done) }()
	w.newSession(n, now)
	w.note(n.name, -1, "", fmt.Sprintf("started (incarnation %d)", n.inc))
}

func (w *world) newSession(n *node, now time.Time) {
	if n.sess != nil && !n.sess.lost {
		return
	}
	// A lost session's lease is revoked once the node reaches the store.
	if n.sess != nil {
		w.m.revoke(n.sess.lease, "old session revoked")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{lease: w.m.grantLease(n.name, now), ctx: ctx, cancel: cancel}
	s.deadline.Store(now.Add(w.cfg.TTL - w.cfg.Margin).UnixNano())
	s.contact.Store(now.UnixNano())
	s.nextRenew = now.Add(w.cfg.TTL / 3)
	w.mu.Lock()
	n.sess = s
	w.mu.Unlock()
	w.note(n.name, -1, "", fmt.Sprintf("session lease %d, deadline %s", s.lease, ts(s.deadlineAt())))
}

// stopNode crashes n: its memory is lost, the store keeps what landed.
func (w *world) stopNode(n *node, why string) {
	w.mu.Lock()
	n.alive = false
	w.mu.Unlock()
	n.cancel()
	// Let the shutdown cancel the runs first: one cause, whatever the
	// runtime's order.
	synctest.Wait()
	for _, s := range sortedKeys(n.held) {
		n.held[s].cancel(scheduler.ErrShardLost)
	}
	n.held = map[int]*holding{}
	w.mu.Lock()
	if n.resume != nil {
		close(n.resume)
		n.resume = nil
	}
	w.mu.Unlock()
	n.pausedUntil, n.partUntil = time.Time{}, time.Time{}
	w.note(n.name, -1, "", "crashed: "+why)
}

// contact updates n's session's Contact after a partition or pause began
// or ended.
func (w *world) contact(n *node, now time.Time) {
	if n.sess != nil {
		n.sess.setCut(now, !w.reaches(n, now))
	}
}

// register hands a call to the sim; false if its node incarnation is gone.
func (w *world) register(c *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !c.n.alive || c.n.inc != c.inc {
		return false
	}
	c.sess = c.n.sess
	w.fresh = append(w.fresh, c)
	w.wake()
	return true
}

func (w *world) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// startRun records the start of a run, unless its node incarnation is
// gone or past its deadline (the runner checks right before it acts). A
// paused node's run waits for the pause to end.
func (w *world) startRun(n *node, inc int, ctx context.Context, run scheduler.Run) (*runRec, bool) {
	called, clock := time.Now(), time.Duration(n.skew.Load())
	w.mu.Lock()
	for n.alive && n.inc == inc && n.resume != nil {
		ch := n.resume
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	rec := &runRec{node: n.name, inc: inc, run: run, called: called, clock: clock, start: time.Now(), done: make(chan struct{}), ack: make(chan struct{})}
	// The runner checks right before it acts, as runner.HTTP does: a run
	// past the deadline, or whose context already ended, has no effect.
	if !n.alive || n.inc != inc || run.Deadline.Remaining() <= 0 || ctx.Err() != nil {
		unit, fire := fireOf(run)
		w.refused = append(w.refused, Run{Node: n.name, Inc: inc, Job: unit, Tick: run.Tick, Fire: fire, Token: run.Token,
			Rerun: run.Rerun, Trigger: run.Trigger, Attempt: run.Attempt, Called: called, Clock: clock, End: time.Now()})
		// Returns when the sim says, as an ended run does: runs a resumed
		// node refuses together report to its loop in a fixed order.
		rec.refused, rec.ended = true, true
		w.newRuns = append(w.newRuns, rec)
		w.wake()
		w.mu.Unlock()
		<-rec.ack
		return nil, false
	}
	defer w.mu.Unlock()
	rec.deadAt = n.sess.deadlineAt()
	w.newRuns = append(w.newRuns, rec)
	w.wake()
	return rec, true
}

// endRun records the end of a run and waits for the sim's leave to return.
func (w *world) endRun(n *node, rec *runRec, ctx context.Context) scheduler.Result {
	w.mu.Lock()
	rec.end, rec.ended = time.Now(), true
	if n.alive && n.inc == rec.inc {
		rec.endDead = n.sess.deadlineAt()
	}
	res := scheduler.Result{Status: scheduler.StatusSucceeded}
	switch {
	case ctx.Err() != nil && !isDone(rec.done):
		rec.cause = fmt.Sprint(context.Cause(ctx))
		res = scheduler.Result{Status: scheduler.StatusCancelled, Detail: rec.cause}
	case rec.interrupted:
		rec.cause = "interrupted from outside: its exec supervisor signalled"
		res = scheduler.Result{Status: scheduler.StatusCancelled, Detail: rec.cause}
	case rec.fail:
		res = scheduler.Result{Status: scheduler.StatusFailed, Detail: "receiver said no"}
	}
	w.wake()
	w.mu.Unlock()
	<-rec.ack
	return res
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nextDue is when the sim has something to do next, at most end.
func (w *world) nextDue(now, end time.Time) time.Time {
	next := end
	take := func(t time.Time) {
		if !t.IsZero() && t.After(now) && t.Before(next) {
			next = t
		}
	}
	w.mu.Lock()
	for _, r := range w.runs {
		if !r.ended {
			take(r.endAt)
		}
	}
	w.mu.Unlock()
	for _, c := range w.calls {
		take(c.readyAt)
		take(c.failAt)
	}
	for _, n := range w.nodes {
		take(n.restartAt)
		take(n.crashAt)
		take(n.partUntil)
		take(n.pausedUntil)
		if n.alive {
			take(n.sess.deadlineAt())
			take(n.sess.nextRenew)
		}
	}
	take(w.m.nextExpiry())
	take(w.stallUntil)
	for _, at := range w.acquireAt {
		take(at)
	}
	take(w.rehandAt)
	take(w.nem.next)
	return next
}

func sortedKeys[V any](mp map[int]V) []int {
	ks := make([]int, 0, len(mp))
	for k := range mp {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// ts formats an instant the way the reports print it.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}
