package shard

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// The probe asks etcd only while the scheduler expects a run soon: told
// that none comes for an hour, the node's contact ages past any beat;
// told that one may start at once, it is fresh again within a round trip.
func TestProbeOnlyAheadOfExpectedRuns(t *testing.T) {
	c := newTestCluster(t, 4)
	n := c.start("a", false)
	c.waitBalanced(waitLimit)
	contact := n.m.contact
	poll.MustEvery(t, 10*time.Millisecond, waitLimit, "a probing node in contact", poll.True(func() bool {
		return contact.ContactAge() < 2*ContactProbe
	}))
	contact.Expect(time.Hour)
	poll.MustEvery(t, 10*time.Millisecond, waitLimit, "contact ages past four beats with no run expected", poll.True(func() bool {
		return contact.ContactAge() > 4*ContactProbe
	}))
	contact.Expect(0)
	poll.MustEvery(t, 5*time.Millisecond, waitLimit, "contact fresh once a run may start at once", poll.True(func() bool {
		return contact.ContactAge() < ContactProbe
	}))
}
