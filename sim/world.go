package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// Config is one simulation's shape; Default gives the CI one.
type Config struct {
	Nodes  int
	Shards int
	Jobs   int
	// Duration is the faulty stretch; Quiet follows it with every fault
	// healed, so catch-up can finish before the checker reads the history.
	Duration, Quiet time.Duration
	TTL, Margin     time.Duration
	DrainTimeout    time.Duration
	// Bursts lets the nemesis file 40 trigger requests for one job at
	// once (issue 21: the scheduler panicked at the 33rd pending manual
	// run, which kills the whole test binary).
	Bursts bool
	// Log, when set, receives every event as it happens and the
	// schedulers' own logs.
	Log io.Writer
}

// Default is the configuration CI seeds run with.
func Default() Config {
	return Config{Nodes: 3, Shards: 4, Jobs: 7, Duration: 90 * time.Second, Quiet: 40 * time.Second,
		TTL: 10 * time.Second, Margin: time.Second, DrainTimeout: 5 * time.Second, Bursts: true}
}

// Event is one thing the sim saw happen outside the runs: ownership,
// faults, store writes, job set changes.
type Event struct {
	At    time.Time
	Node  string
	Shard int // -1: none
	Job   string
	What  string
}

// world is one simulation: the nodes, the store model, the receiver.
type world struct {
	cfg     Config
	seed    uint64
	maxSkew time.Duration // the largest clock step of any owner (History.Skew)
	rng     *rand.Rand
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
	drains  []drainDone
	kick    chan struct{} // buffered 1: something was registered
	nextID  int64

	acquireAt map[int]time.Time // free shard -> when an acquisition is tried
	// stallUntil: the store answers nothing and revokes no lease before it
	// (an etcd stall); its leases' time runs on.
	stallUntil time.Time
	rehandAt   time.Time
	triggers   map[string]trigInfo
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

func (ev Event) String() string {
	s := ts(ev.At)
	if ev.Node != "" {
		s += " " + ev.Node
	}
	if ev.Shard >= 0 {
		s += fmt.Sprintf(" shard %d", ev.Shard)
	}
	if ev.Job != "" {
		s += " " + ev.Job
	}
	return s + ": " + ev.What
}

// simulate runs one seed inside the calling synctest bubble and returns
// its history.
func simulate(seed uint64, cfg Config) *History {
	w := &world{cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), start: time.Now(),
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
	w.mu.Lock()
	for n.alive && n.inc == inc && n.resume != nil {
		ch := n.resume
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	// The runner checks right before it acts, as runner.HTTP does: a run
	// past the deadline, or whose context already ended, has no effect.
	if !n.alive || n.inc != inc || run.Deadline.Remaining() <= 0 || ctx.Err() != nil {
		return nil, false
	}
	rec := &runRec{node: n.name, inc: inc, run: run, start: time.Now(), done: make(chan struct{}), ack: make(chan struct{})}
	rec.deadAt = n.sess.deadlineAt()
	w.newRuns = append(w.newRuns, rec)
	w.wake()
	return rec, true
}

// endRun records the end of a run and waits for the sim's leave to return.
func (w *world) endRun(rec *runRec, ctx context.Context) scheduler.Result {
	w.mu.Lock()
	rec.end, rec.ended = time.Now(), true
	res := scheduler.Result{Status: scheduler.StatusSucceeded}
	switch {
	case ctx.Err() != nil && !isDone(rec.done):
		rec.cause = fmt.Sprint(context.Cause(ctx))
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

// absorb takes what the ports registered since the last look, in a
// deterministic order, and decides its fate.
func (w *world) absorb(now time.Time) {
	w.mu.Lock()
	fresh, runs := w.fresh, w.newRuns
	w.fresh, w.newRuns = nil, nil
	w.mu.Unlock()
	slices.SortStableFunc(fresh, func(a, b *call) int {
		return cmp.Or(a.sentAt.Compare(b.sentAt), cmp.Compare(a.n.name, b.n.name), cmp.Compare(a.key, b.key))
	})
	for _, c := range fresh {
		w.nextID++
		c.id = w.nextID
		w.nem.decideCall(c, now)
		w.calls = append(w.calls, c)
	}
	slices.SortStableFunc(runs, func(a, b *runRec) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.node, b.node), cmp.Compare(a.run.Job.Name, b.run.Job.Name),
			a.run.Tick.Compare(b.run.Tick), cmp.Compare(a.run.Attempt, b.run.Attempt))
	})
	for _, r := range runs {
		w.nextID++
		r.id = w.nextID
		d, fail := w.jobs.duration(r.run.Job.Name)
		r.endAt, r.fail = now.Add(d), fail
		w.runs = append(w.runs, r)
	}
}

// loop drives the world until end: one action at a time, each followed by
// synctest.Wait, or a sleep to the next thing due.
func (w *world) loop(end time.Time) {
	for {
		synctest.Wait()
		now := time.Now()
		w.absorb(now)
		if w.act(now, end) {
			continue
		}
		if !now.Before(end) {
			return
		}
		next := w.nextDue(now, end)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-w.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// act does the first thing due at now, if any.
func (w *world) act(now, end time.Time) bool {
	return w.ackOne() || w.endOne(now) || w.drainEnded() || w.deadlines(now) || w.expire(now) ||
		w.answerDead() || w.deliver(now) || w.renew(now) || w.nem.heal(now) || w.acquire(now) ||
		w.rehand(now) || w.nem.act(now, end)
}

// ackOne lets one ended run return.
func (w *world) ackOne() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if r.ended && !r.acked {
			r.acked = true
			close(r.ack)
			return true
		}
	}
	return false
}

// endOne ends the work of one run whose time is up.
func (w *world) endOne(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.runs {
		if !r.ended && !isDone(r.done) && !now.Before(r.endAt) {
			close(r.done)
			return true
		}
	}
	return false
}

// deadlines stops acting for every node whose safe deadline passed: the
// lease package's loss of a session.
func (w *world) deadlines(now time.Time) bool {
	for _, n := range w.nodes {
		if !n.alive || n.sess.lost || now.Before(n.sess.deadlineAt()) {
			continue
		}
		n.sess.lost = true
		n.sess.deadline.Store(0)
		n.sess.cancel()
		for _, s := range sortedKeys(n.held) {
			n.held[s].cancel(scheduler.ErrDeadline)
		}
		n.held = map[int]*holding{}
		w.note(n.name, -1, "", "safe deadline passed: every shard stopped")
		return true
	}
	return false
}

func (w *world) expire(now time.Time) bool {
	if now.Before(w.stallUntil) {
		return false
	}
	if e := w.m.nextExpiry(); !e.IsZero() && !now.Before(e) {
		return w.m.expire(now)
	}
	return false
}

// answerDead answers the calls of stopped incarnations and of lost
// sessions (their callers gave up at the deadline): unknown outcome; some
// landed anyway.
func (w *world) answerDead() bool {
	now := time.Now()
	for i, c := range w.calls {
		dead := !c.n.alive || c.n.inc != c.inc
		if !dead && !c.sess.lost && (c.failAt.IsZero() || now.Before(c.failAt)) {
			continue
		}
		w.calls = slices.Delete(w.calls, i, i+1)
		if (dead || c.sess.lost) && c.fate == fateLostOK {
			w.land(c) // it had reached the store; its answer is lost
		}
		c.reply <- w.unknown(c, "no answer")
		return true
	}
	return false
}

// deliver lands the call that is ready first, if its node can reach the
// store.
func (w *world) deliver(now time.Time) bool {
	best := -1
	for i, c := range w.calls {
		if now.Before(c.readyAt) || !w.reaches(c.n, now) {
			continue
		}
		if best < 0 || c.readyAt.Before(w.calls[best].readyAt) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	c := w.calls[best]
	w.calls = slices.Delete(w.calls, best, best+1)
	switch c.fate {
	case fateDrop:
		c.reply <- w.unknown(c, "dropped")
	case fateLostOK:
		w.land(c)
		c.reply <- w.unknown(c, "answer lost")
	default:
		r := w.land(c)
		c.sess.answered(c.sentAt)
		c.reply <- r
	}
	return true
}

// unknown is a call's answer when its outcome is unknown.
func (w *world) unknown(c *call, why string) any {
	err := fmt.Errorf("%w: %s", scheduler.ErrUnknown, why)
	switch c.kind {
	case callCommit:
		out := make([]scheduler.WriteResult, len(c.writes))
		for i := range out {
			out[i].Err = err
		}
		return out
	case callHistory:
		out := make([]error, len(c.hist))
		for i := range out {
			out[i] = err
		}
		return out
	case callLoad:
		return loadResult{err: err}
	default:
		return err
	}
}

// land applies a call to the store and returns its answer. The shard
// package refuses locally a write of a Grant that already ended.
func (w *world) land(c *call) any {
	lost := func(shard int, token int64) {
		if h := c.n.held[shard]; h != nil && h.gen == token && c.n.inc == c.inc {
			h.cancel(scheduler.ErrShardLost)
			delete(c.n.held, shard)
			w.note(c.n.name, shard, "", fmt.Sprintf("fenced write failed: gen %d lost", token))
		}
	}
	switch c.kind {
	case callCommit:
		return w.m.commit(c.n.name, c.writes, lost)
	case callHistory:
		return w.m.appendHistory(c.keep, c.hist)
	case callLoad:
		st, err := w.m.load(c.shard, c.token, c.job)
		return loadResult{st, err}
	default:
		ok := w.m.release(c.n.name, c.shard, c.token, c.rel)
		if ok || !w.m.fenceHolds(c.shard, c.token) {
			if c.n.held[c.shard] == c.h {
				delete(c.n.held, c.shard)
			}
		}
		return error(nil)
	}
}

// renew sends due renewals of connected nodes (instantly answered).
func (w *world) renew(now time.Time) bool {
	for _, n := range w.nodes {
		if !n.alive || n.paused(now) {
			continue
		}
		if n.sess.lost {
			if w.reaches(n, now) {
				w.newSession(n, now)
				return true
			}
			continue
		}
		if now.Before(n.sess.nextRenew) {
			continue
		}
		if !w.reaches(n, now) {
			n.sess.nextRenew = now.Add(w.cfg.TTL / 10)
			continue
		}
		if !w.m.keepAlive(n.sess.lease, now) {
			n.sess.nextRenew = now.Add(w.cfg.TTL / 10)
			continue
		}
		n.sess.deadline.Store(now.Add(w.cfg.TTL - w.cfg.Margin).UnixNano())
		n.sess.answered(now)
		n.sess.nextRenew = now.Add(w.cfg.TTL / 3)
		return true
	}
	return false
}

// acquire gives free shards to connected nodes, a little after they come
// free: the ownership layer's acquisition and checkpoint read.
func (w *world) acquire(now time.Time) bool {
	for s := range w.cfg.Shards {
		if _, held := w.m.shards[s]; held {
			delete(w.acquireAt, s)
			continue
		}
		at, ok := w.acquireAt[s]
		if !ok {
			w.acquireAt[s] = now.Add(time.Duration(w.rng.Int64N(int64(500 * time.Millisecond))))
			return true
		}
		if now.Before(at) {
			continue
		}
		var cands []*node
		for _, n := range w.nodes {
			if w.reaches(n, now) && !n.sess.lost && n.held[s] == nil {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			w.acquireAt[s] = now.Add(time.Second)
			continue
		}
		n := cands[w.rng.IntN(len(cands))]
		delete(w.acquireAt, s)
		w.grant(n, s, now)
		return true
	}
	return false
}

func (w *world) grant(n *node, s int, now time.Time) {
	gen, marker, ok := w.m.acquire(s, n.name, n.sess.lease)
	if !ok {
		return
	}
	h := &holding{shard: s, gen: gen, sess: n.sess}
	h.lost, h.cancel = context.WithCancelCause(context.Background())
	n.held[s] = h
	g := scheduler.Grant{Shard: s, Token: gen, Lost: h.lost, Deadline: n.sess, Contact: n.sess,
		Checkpoint: scheduler.Checkpoint{Records: w.m.checkpoint(s), Released: marker}}
	trigs := w.m.triggersOf(s, gen)
	sched := n.sched
	go func() {
		sched.Acquired(g)
		for _, t := range trigs {
			sched.Triggered(t)
		}
	}()
}

// rehand hands every pending trigger request to its shard's owner again,
// every second (the shard package's watch and periodic re-read).
func (w *world) rehand(now time.Time) bool {
	if now.Before(w.rehandAt) {
		return false
	}
	w.rehandAt = now.Add(time.Second)
	for _, n := range w.nodes {
		if !n.alive {
			continue
		}
		var trigs []scheduler.Trigger
		for _, s := range sortedKeys(n.held) {
			if h := n.held[s]; !h.draining && h.lost.Err() == nil {
				trigs = append(trigs, w.m.triggersOf(s, h.gen)...)
			}
		}
		if len(trigs) == 0 {
			continue
		}
		sched := n.sched
		go func() {
			for _, t := range trigs {
				sched.Triggered(t)
			}
		}()
	}
	return true
}

// drainShard starts a graceful release of h by n: Drain, then the release
// transaction with its marker.
func (w *world) drainShard(n *node, h *holding) {
	h.draining = true
	ctx, cancel := context.WithTimeout(h.sess.ctx, w.cfg.DrainTimeout)
	sched, inc := n.sched, n.inc
	w.note(n.name, h.shard, "", fmt.Sprintf("drain gen %d", h.gen))
	go func() {
		rel := sched.Drain(ctx, h.shard)
		cancel()
		w.mu.Lock()
		w.drains = append(w.drains, drainDone{n: n, inc: inc, h: h, rel: rel})
		w.wake()
		w.mu.Unlock()
	}()
}

// drainEnded ends the Grant of a drained shard and sends its release.
func (w *world) drainEnded() bool {
	w.mu.Lock()
	if len(w.drains) == 0 {
		w.mu.Unlock()
		return false
	}
	d := w.drains[0]
	w.drains = w.drains[1:]
	w.mu.Unlock()
	d.h.cancel(errors.New("released"))
	if !d.n.alive || d.n.inc != d.inc || d.n.held[d.h.shard] != d.h {
		return true
	}
	rel := scheduler.Released{StoppedAt: d.rel.StoppedAt, Token: d.h.gen, Handed: d.rel.Handed}
	w.note(d.n.name, d.h.shard, "", fmt.Sprintf("drained gen %d: %s", d.h.gen, markerString(&rel)))
	c := &call{kind: callRelease, shard: d.h.shard, token: d.h.gen, h: d.h, rel: rel, key: fmt.Sprintf("r%d", d.h.shard)}
	c.n, c.inc, c.sentAt, c.reply = d.n, d.inc, time.Now(), make(chan any, 1)
	if w.register(c) {
		go func() { <-c.reply }()
	}
	return true
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
