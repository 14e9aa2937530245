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
type Contact struct {
	sent  atomic.Int64 // boottime nanoseconds; 0 until the first answer
	clock clock
}

// NewContact returns a Contact that has heard nothing yet.
func NewContact() *Contact { return &Contact{clock: boottime} }

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
