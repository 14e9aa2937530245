package scheduler

import (
	"context"
	"testing"
	"time"
)

// instantDeadline is a Deadline with a fixed instant.
type instantDeadline struct{ at time.Duration }

func (d instantDeadline) Remaining() time.Duration { return time.Hour }
func (d instantDeadline) Deadline() time.Duration  { return d.at }

// A run's Deadline passes the session's instant through unchanged (the exec
// supervisor gets exactly it), and has none once the shard is lost.
func TestRunDeadlinePassesTheInstantThrough(t *testing.T) {
	lost, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	const at = 123456789 * time.Millisecond
	d := newRunDeadline(Grant{Lost: lost, Deadline: instantDeadline{at}})
	if got := d.Deadline(); got != at {
		t.Fatalf("instant %v, want %v", got, at)
	}
	cancel(ErrShardLost)
	if got, rem := d.Deadline(), d.Remaining(); got != 0 || rem != 0 {
		t.Fatalf("after the loss: instant %v, remaining %v; want 0, 0", got, rem)
	}
}
