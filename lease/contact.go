package lease

import (
	"sync/atomic"
	"time"
)

// Contact records how recently this node heard from etcd: the send time,
// on CLOCK_BOOTTIME, of the latest request etcd answered. The scheduler
// starts a claimed tick only while that is recent, so that a node cut off
// from etcd does not run what it could not record (its successor would run
// the tick again). Any answer counts: a landed or refused transaction, a
// read. Safe for concurrent use.
//
// It also carries when the node next needs that contact (Expect): the
// shard package's probe, a linearizable read, is only worth sending ahead
// of a run, and a node idle for an hour would otherwise read twenty
// times a second.
type Contact struct {
	sent atomic.Int64 // boottime nanoseconds; 0 until the first answer
	// want is when a run may next start, boottime nanoseconds; 0 (any
	// moment) until the scheduler says otherwise.
	want  atomic.Int64
	soon  chan struct{} // has a value when a want came within reach (Soon)
	clock clock
}

// NewContact returns a Contact that has heard nothing yet and is wanted at
// once.
func NewContact() *Contact { return newContact(boottime) }

func newContact(c clock) *Contact { return &Contact{clock: c, soon: make(chan struct{}, 1)} }

// Begin is the instant to hand to Answered once the request sent now is
// answered.
func (c *Contact) Begin() time.Duration { return c.clock() }

// Answered records an answer to a request sent at sent (from Begin).
func (c *Contact) Answered(sent time.Duration) {
	for {
		old := c.sent.Load()
		if int64(sent) <= old || c.sent.CompareAndSwap(old, int64(sent)) {
			return
		}
	}
}

// ContactAge is how long ago the latest answered request was sent; a very
// long time before the first answer.
func (c *Contact) ContactAge() time.Duration {
	sent := c.sent.Load()
	if sent == 0 {
		return time.Duration(1<<63 - 1)
	}
	return c.clock() - time.Duration(sent)
}

// Expect records that the node's next run may start in d from now (0: at
// any moment). It replaces what was expected before: the caller knows
// everything that may start. A want that comes within reach (at most
// ExpectReach away) where it was not is signalled on Soon, so the prober
// need not wait for its next beat.
func (c *Contact) Expect(d time.Duration) {
	now := c.clock()
	at := now + max(d, 0)
	old := time.Duration(c.want.Swap(int64(at)))
	if at-now <= ExpectReach && old-now > ExpectReach {
		select {
		case c.soon <- struct{}{}:
		default:
		}
	}
}

// ExpectReach is how far ahead of an expected run Wanted holds: two of the
// shard package's probe beats, so that one probe lands at least a beat
// before the run.
const ExpectReach = 100 * time.Millisecond

// Wanted reports whether a run may start within ExpectReach.
func (c *Contact) Wanted() bool {
	return time.Duration(c.want.Load())-c.clock() <= ExpectReach
}

// Soon delivers a value when an expected run came within ExpectReach
// before the next check of Wanted would have seen it.
func (c *Contact) Soon() <-chan struct{} { return c.soon }
