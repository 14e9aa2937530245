package lease

import (
	"testing"
	"time"
)

// A Contact is wanted until told otherwise, then only within ExpectReach
// of the expected run; a want that comes within reach wakes the prober
// once, not at every word.
func TestContactWantedAheadOfTheExpectedRun(t *testing.T) {
	now := time.Duration(1_000) * time.Second
	c := newContact(func() time.Duration { return now })
	woken := func() bool {
		select {
		case <-c.Soon():
			return true
		default:
			return false
		}
	}
	if !c.Wanted() {
		t.Fatal("a new Contact is not wanted: a node would start without probing")
	}
	c.Expect(time.Minute)
	if c.Wanted() || woken() {
		t.Fatal("wanted (or woken) a minute before the next run")
	}
	now += time.Minute - ExpectReach
	if !c.Wanted() {
		t.Fatalf("not wanted %v before the expected run", ExpectReach)
	}
	if woken() {
		t.Fatal("woken by the clock: the prober's own beat sees that")
	}
	c.Expect(time.Hour)
	c.Expect(0)
	if !c.Wanted() || !woken() {
		t.Fatal("a run expected at once, after none for an hour: not wanted at once")
	}
	c.Expect(0)
	if woken() {
		t.Fatal("woken again while already wanted")
	}
}

// ContactAge measures from the send of the latest answered request.
func TestContactAgeFromTheLatestSend(t *testing.T) {
	now := 10 * time.Second
	c := newContact(func() time.Duration { return now })
	if c.ContactAge() < time.Hour {
		t.Fatalf("age %v before any answer", c.ContactAge())
	}
	sent := c.Begin()
	now += 300 * time.Millisecond
	c.Answered(sent)
	c.Answered(sent - time.Second) // an older request answered later
	if got := c.ContactAge(); got != 300*time.Millisecond {
		t.Fatalf("age %v, want 300ms (from the send, not the answer)", got)
	}
}
