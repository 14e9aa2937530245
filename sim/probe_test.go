package sim

import (
	"testing"
	"time"
)

// A wake (Expect of a run within reach, where none was) sends a probe that
// counts from just after the instant, and the probes before it still
// count: a worker reading contact at that instant reads one age whether it
// looked before the wake or after. Seed 5945 replayed two ways when the
// wake forgot the earlier probe.
func TestWakeKeepsEarlierProbes(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	var p probeModel
	p.expect(t0, 0) // a run may start at any moment: beats go
	beat := t0.Add(probeEvery)
	if got := p.at(t0.Add(probeEvery + 20*time.Millisecond)); !got.Equal(beat) {
		t.Fatalf("while wanted, the latest probe is %v, want the beat at %v", got, beat)
	}
	p.expect(t0.Add(probeEvery+20*time.Millisecond), 10*time.Second) // nothing soon: beats stop

	wake := t0.Add(2 * time.Second)
	before := p.at(wake)
	p.expect(wake, 0)
	if after := p.at(wake); !after.Equal(before) || !before.Equal(beat) {
		t.Errorf("at the wake the latest probe is %v before it and %v after it, want %v both", before, after, beat)
	}
	if got, want := p.at(wake.Add(time.Nanosecond)), wake.Add(time.Nanosecond); !got.Equal(want) {
		t.Errorf("just after the wake the latest probe is %v, want the wake's own at %v", got, want)
	}
}
