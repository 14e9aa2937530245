package scheduler

import "time"

// Telling the store's side when a run may next start (Contact.Expect), so
// that it keeps contact fresh (shard's probe, a linearizable read) only
// ahead of runs: an owner whose jobs fire once a minute, or none, asks
// the store nothing in between. Runs still start only in contact
// (held.go); this only decides when contact is looked after.

// idleExpect is what an owner with nothing armed expects: no run for this
// long. It is told again when half of it has passed (the loop wakes at
// least every maxSleep).
const idleExpect = 10 * time.Minute

// expectation is what the node's contacts were last told.
type expectation struct {
	told bool      // false: tell at the next look (a contact joined)
	now  bool      // a run may start at any moment
	at   time.Time // else the next timer, on the scheduler's clock
}

// nextStart is when a run may next start: going when one may at any
// moment (runs go, so a slot or a held tick may be freed; ticks wait or
// are held), else the earliest timer (a claim's write, a due tick); none
// when nothing is armed.
func (s *Scheduler) nextStart() (at time.Time, going, armed bool) {
	if s.used > 0 || len(s.waiting) > 0 || len(s.unstarted) > 0 {
		return time.Time{}, true, true
	}
	if len(s.timers) > 0 {
		return s.timers[0].at, false, true
	}
	return time.Time{}, false, false
}

// expectRuns tells every contact of the owned shards when a run may next
// start, if that changed since they were last told.
func (s *Scheduler) expectRuns(now time.Time) {
	at, going, armed := s.nextStart()
	old := s.expected
	var d time.Duration
	switch {
	case going:
		if old.told && old.now {
			return
		}
		s.expected = expectation{told: true, now: true}
	case armed:
		if old.told && !old.now && old.at.Equal(at) {
			return
		}
		s.expected, d = expectation{told: true, at: at}, max(at.Sub(now), 0)
	default:
		if old.told && !old.now && old.at.Sub(now) > idleExpect/2 {
			return
		}
		s.expected, d = expectation{told: true, at: now.Add(idleExpect)}, idleExpect
	}
	for c := range s.contacts {
		c.Expect(d)
	}
}

// addContact counts a shard's contact in; a new one is told at the next
// look.
func (s *Scheduler) addContact(c Contact) {
	if c == nil {
		return
	}
	if s.contacts[c]++; s.contacts[c] == 1 {
		s.expected.told = false
	}
}

// dropContact counts a shard's contact out.
func (s *Scheduler) dropContact(c Contact) {
	if c == nil {
		return
	}
	if s.contacts[c]--; s.contacts[c] <= 0 {
		delete(s.contacts, c)
	}
}
