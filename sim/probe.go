package sim

import (
	"sync"
	"time"
)

// The shard package's contact probe, modelled rather than sent (a probe
// would cost a sim step each): a linearizable read at every beat of
// probeEvery while the node's scheduler expects a run within expectReach
// (scheduler.Contact.Expect), and at once when an expected run comes
// within that reach from beyond it (lease.Contact.Soon). While the node
// reaches the store, each probe is answered as it is sent.

// probeEvery is shard.ContactProbe; expectReach is lease.ExpectReach.
const (
	probeEvery  = 50 * time.Millisecond
	expectReach = 100 * time.Millisecond
)

// probeModel is when a node's probes were sent, as far as the virtual
// clock has gone. The scheduler's loop tells it (Expect) and its workers
// read it (ContactAge), hence the lock.
type probeModel struct {
	mu sync.Mutex
	// want is when a run may next start; the node probes on beats from
	// max(from, want-expectReach). Both zero at first: probing.
	want, from time.Time
	probed     time.Time // the latest probe sent before from
	soon       time.Time // the probe a wake sent just after it (Soon)
}

// latest is the latest probe sent by now.
func (p *probeModel) latest(now time.Time) time.Time {
	var last time.Time
	if !p.probed.After(now) {
		last = p.probed
	}
	if !p.soon.After(now) && p.soon.After(last) {
		last = p.soon
	}
	start := p.from
	if w := p.want.Add(-expectReach); w.After(start) {
		start = w
	}
	if b := now.Truncate(probeEvery); !now.Before(start) && !b.Before(start) && b.After(last) {
		last = b
	}
	return last
}

// expect is scheduler.Contact.Expect at now.
func (p *probeModel) expect(now time.Time, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldStart := p.from
	if w := p.want.Add(-expectReach); w.After(oldStart) {
		oldStart = w
	}
	wasOn := !now.Before(oldStart)
	p.probed = p.latest(now) // a wake's probe by now, too
	p.want = now.Add(max(d, 0))
	switch {
	case d > expectReach:
		p.from = now
	case wasOn:
		p.from = oldStart // the beats go on
	default:
		// Woken at once (lease.Contact.Soon). Its probe counts from just
		// after now, and the probes before it still count: what a worker
		// reads at now is then the same whether it looked before this call
		// or after it, as a real probe's answer comes a round trip later.
		p.from = now.Add(time.Nanosecond)
		p.soon = p.from
	}
}

// at is the latest probe sent by now.
func (p *probeModel) at(now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest(now)
}

// Expect is the scheduler's word of when its next run may start.
func (s *session) Expect(d time.Duration) { s.probe.expect(time.Now(), d) }

// ContactAge is how long since the send of the latest request the store
// answered: a write's, or while the node reaches the store, a probe's.
func (s *session) ContactAge() time.Duration {
	now := time.Now()
	sent := time.Unix(0, s.contact.Load())
	if s.cut.Load() == 0 {
		if p := s.probe.at(now); p.After(sent) {
			sent = p
		}
	}
	return now.Sub(sent)
}

// setCut records that the node lost (or regained) the store at now; the
// last probe before the cut counts as an answer.
func (s *session) setCut(now time.Time, cut bool) {
	if !cut {
		s.cut.Store(0)
		s.answered(now)
		return
	}
	if s.cut.Load() == 0 {
		s.answered(s.probe.at(now))
		s.cut.Store(now.UnixNano())
	}
}

func (s *session) answered(sent time.Time) {
	if sent.IsZero() {
		return
	}
	if n := sent.UnixNano(); n > s.contact.Load() {
		s.contact.Store(n)
	}
}
