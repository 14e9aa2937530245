package shard

import "time"

// Churn window: acquisitions are counted in buckets of churnStep over the
// last churnMinutes minutes, so the rate needs no list of changes.
const (
	churnStep    = 10 * time.Second
	churnMinutes = 15
	churnBuckets = churnMinutes * int(time.Minute/churnStep)
)

// churn counts the shard acquisitions this node's watch on own/ sees,
// cluster-wide, in fixed time buckets. The count is exact however many
// shards change hands (unlike a page that keeps the last few hundred
// changes); its resolution is churnStep. Not safe for concurrent use: the
// feed holds it under its mutex.
type churn struct {
	count [churnBuckets]int
	// slot holds the bucket number (unix time / churnStep) count[i] is for;
	// a bucket whose slot is older than the window counts nothing.
	slot [churnBuckets]int64
}

func churnSlot(t time.Time) int64 { return t.UnixNano() / int64(churnStep) }

// add counts n acquisitions at t.
func (c *churn) add(t time.Time, n int) {
	s := churnSlot(t)
	i := int(s % int64(churnBuckets))
	if i < 0 {
		i += churnBuckets
	}
	if c.slot[i] != s {
		c.slot[i], c.count[i] = s, 0
	}
	c.count[i] += n
}

// window returns the acquisitions in the minute up to now (a sliding
// window, to churnStep), and per minute over the last churnMinutes minutes,
// oldest first, the last element being that same sliding minute.
func (c *churn) window(now time.Time) (perMin int, bins []int) {
	bins = make([]int, churnMinutes)
	per := int(time.Minute / churnStep)
	last := churnSlot(now)
	for i := range c.count {
		age := last - c.slot[i] // in buckets; 0 is the current one
		if c.count[i] == 0 || age < 0 || age >= int64(churnBuckets) {
			continue
		}
		bins[churnMinutes-1-int(age)/per] += c.count[i]
	}
	return bins[churnMinutes-1], bins
}
