package sim

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shardcron/shardcron/scheduler"
)

// The scheduler's ports, as each simulated node implements them: every
// store call and every run is handed to the sim's goroutine and waits for
// it, so the sim decides what lands, when, and in which order.

// session is a node's lease session: its safe deadline on the virtual
// clock, as the lease package keeps it (sent_at of the last successful
// renewal + TTL - margin). It is the Grant's Deadline.
type session struct {
	lease    int64
	deadline atomic.Int64 // Unix nanoseconds; 0 once declared lost
	// contact is the send time of the latest request the store answered
	// (Unix nanoseconds); cut is when the node lost the store (partition,
	// pause; 0 while it reaches it). Together they are Grant.Contact.
	contact   atomic.Int64
	cut       atomic.Int64
	probe     probeModel // the shard package's probe (probe.go)
	nextRenew time.Time
	lost      bool
	// ctx is cancelled when the session is declared lost (the shard
	// package's lostCtx): drains end with it.
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *session) Remaining() time.Duration {
	d := s.deadline.Load()
	if d == 0 {
		return 0
	}
	return time.Until(time.Unix(0, d))
}

func (s *session) deadlineAt() time.Time { return time.Unix(0, s.deadline.Load()) }

// Deadline is the instant Remaining points at, on the real CLOCK_BOOTTIME
// (the bubble fakes only time.Now); the sim's runner never reads it.
func (s *session) Deadline() time.Duration {
	rem := s.Remaining()
	if rem <= 0 {
		return 0
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano()) + rem
}

type callKind uint8

const (
	callCommit callKind = iota + 1
	callHistory
	callLoad
	callRelease
	callJournal
)

// call is one store request of a node, waiting for the sim.
type call struct {
	id     int64 // assigned by the sim when it first sees the call
	n      *node
	inc    int // the node's incarnation that sent it
	sess   *session
	kind   callKind
	sentAt time.Time
	key    string // a deterministic description: the sort key among calls sent at one instant

	writes []scheduler.Write
	keep   int
	hist   []scheduler.HistoryWrite
	shard  int
	token  int64
	job    string
	rel    scheduler.Released
	h      *holding
	jseq   int64
	jlines []scheduler.JournalLine
	jdrop  []int64

	reply chan any // buffered 1: the result
	// Set by the sim: when it lands, and its fate.
	readyAt time.Time
	failAt  time.Time // zero: none; when a partitioned call gives up
	fate    fate
}

type fate uint8

const (
	fateOK     fate = iota
	fateDrop        // never lands; the caller hears ErrUnknown
	fateLostOK      // lands; the answer is lost (ErrUnknown)
)

// nodeStore is a node incarnation's scheduler.Store, History and Loader.
type nodeStore struct {
	w   *world
	n   *node
	inc int
}

func (p nodeStore) send(c *call) any {
	c.n, c.inc, c.sentAt, c.reply = p.n, p.inc, time.Now(), make(chan any, 1)
	if !p.w.register(c) {
		return nil
	}
	return <-c.reply
}

func (p nodeStore) Commit(_ context.Context, writes []scheduler.Write) []scheduler.WriteResult {
	var b strings.Builder
	for _, w := range writes {
		fmt.Fprintf(&b, "%d/%s/%d/%d/%d;", w.Shard, w.Job, w.Token, w.Rev, len(w.Value))
	}
	r := p.send(&call{kind: callCommit, writes: writes, key: "c" + b.String()})
	if r == nil {
		return unknownResults(len(writes))
	}
	return r.([]scheduler.WriteResult)
}

func unknownResults(n int) []scheduler.WriteResult {
	out := make([]scheduler.WriteResult, n)
	for i := range out {
		out[i].Err = fmt.Errorf("%w: node stopped", scheduler.ErrUnknown)
	}
	return out
}

func (p nodeStore) AppendHistory(_ context.Context, keep int, ws []scheduler.HistoryWrite) []error {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "%d/%s/%d/%d;", w.Shard, w.Job, w.Token, len(w.Entries))
	}
	r := p.send(&call{kind: callHistory, keep: keep, hist: ws, key: "h" + b.String()})
	if r == nil {
		errs := make([]error, len(ws))
		for i := range errs {
			errs[i] = scheduler.ErrUnknown
		}
		return errs
	}
	return r.([]error)
}

// nodeJournal is a node incarnation's scheduler.Journal: every node of the
// sim reads the journal, so it is always open. Like the shard package, it
// writes nothing once its session is past its safe deadline.
type nodeJournal nodeStore

func (nodeJournal) Open() bool { return true }

func (p nodeJournal) Append(_ context.Context, seq int64, lines []scheduler.JournalLine, drop []int64) error {
	p.w.mu.Lock()
	sess := p.n.sess
	p.w.mu.Unlock()
	if sess == nil || sess.Remaining() <= 0 {
		return fmt.Errorf("%w: session past its deadline", scheduler.ErrUnknown)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "j%d/%d", seq, len(lines))
	for _, d := range drop {
		fmt.Fprintf(&b, "/-%d", d)
	}
	r := nodeStore(p).send(&call{kind: callJournal, jseq: seq, jlines: lines, jdrop: drop, key: b.String()})
	if r == nil {
		return fmt.Errorf("%w: node stopped", scheduler.ErrUnknown)
	}
	err, _ := r.(error) // journalLanded when it landed
	return err
}

// journalLanded is a journal call's answer when it landed (an error in
// an interface would be nil, the answer of a stopped node).
type journalLanded struct{}

type loadResult struct {
	st  scheduler.Stored
	err error
}

func (p nodeStore) Load(_ context.Context, shard int, token int64, job string) (scheduler.Stored, error) {
	r := p.send(&call{kind: callLoad, shard: shard, token: token, job: job, key: fmt.Sprintf("l%d/%d/%s", shard, token, job)})
	if r == nil {
		return scheduler.Stored{}, scheduler.ErrUnknown
	}
	lr := r.(loadResult)
	return lr.st, lr.err
}

// runRec is one run as the receiver saw it.
type runRec struct {
	id     int64 // assigned by the sim
	node   string
	inc    int
	run    scheduler.Run
	called time.Time     // when the scheduler handed it to the runner
	clock  time.Duration // how far its node's wall clock was off then
	start  time.Time     // when it reached the receiver (later if its node was paused)
	end    time.Time
	endAt  time.Time // when its work ends, chosen by the sim
	fail   bool
	// interrupted: its work ends at endAt cancelled from outside the
	// scheduler (Config.Interrupts).
	interrupted bool
	ended       bool   // the run's call has noticed its end (work done or cancelled)
	refused     bool   // turned away before it started: not a run (world.refused)
	cause       string // why it ended early
	acked       bool
	done        chan struct{} // closed by the sim: the work is done
	ack         chan struct{} // closed by the sim: the call may return
	deadAt      time.Time     // the owner's safe deadline at the start
	endDead     time.Time     // and at the end
}

// simRunner is a node incarnation's scheduler.Runner: the receiver.
type simRunner struct {
	w   *world
	n   *node
	inc int
}

func (simRunner) KillGrace() time.Duration { return time.Second }

func (r simRunner) Run(ctx context.Context, run scheduler.Run) scheduler.Result {
	rec, ok := r.w.startRun(r.n, r.inc, ctx, run)
	if !ok {
		return scheduler.Result{Status: scheduler.StatusCancelled, Detail: "not started: past the safe deadline or node stopped", NotStarted: true}
	}
	select {
	case <-rec.done:
	case <-ctx.Done():
	}
	return r.w.endRun(r.n, rec, ctx)
}
