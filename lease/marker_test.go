package lease

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// A release marker speaks only for the ownership it ended: the first
// acquisition after it gets it (and consumes it), a later one never does;
// a release with no stop time hands over no window.
func TestMarkerGoesToTheFirstAcquisitionOnly(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	var sessions []*Session
	for i := 0; i < 3; i++ {
		cfg, _ := testCfg(3 * time.Second)
		sessions = append(sessions, newSession(t, cli, cfg))
	}
	a, b, c := sessions[0], sessions[1], sessions[2]
	const shard = 9
	tok, m, err := a.Acquire(ctx, shard, "a")
	if err != nil || m != nil {
		t.Fatalf("first acquisition: marker %v, err %v", m, err)
	}
	stopped := time.Date(2026, 6, 1, 12, 0, 5, 0, time.UTC)
	if errs, err := a.Release(ctx, []Release{{Token: tok, StoppedAt: stopped}}); err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", errs, err)
	}
	tokB, m, err := b.Acquire(ctx, shard, "b")
	if err != nil || m == nil || !m.StoppedAt.Equal(stopped) || m.Generation != tok.Generation {
		t.Fatalf("acquisition after the release: marker %+v, err %v; want stopped_at %v of token %d", m, err, stopped, tok.Generation)
	}
	if got, err := b.MarkerBefore(ctx, tokB); err != nil || got == nil || !got.StoppedAt.Equal(stopped) {
		t.Fatalf("MarkerBefore = %+v, %v", got, err)
	}
	// b crashes without releasing: its lease ends and the key goes.
	b.Close()
	tokC, m, err := c.Acquire(ctx, shard, "c")
	if err != nil || m != nil {
		t.Fatalf("acquisition after an owner that crashed: marker %+v, err %v; want none", m, err)
	}
	if got, err := c.MarkerBefore(ctx, tokC); err != nil || got != nil {
		t.Fatalf("MarkerBefore after a crash = %+v, %v; want none", got, err)
	}
	// A release with no stop time writes no marker.
	if errs, err := c.Release(ctx, []Release{{Token: tokC}}); err != nil || errs[0] != nil {
		t.Fatalf("release: %v %v", errs, err)
	}
	if _, m, err := a.Acquire(ctx, shard, "a"); err != nil || m != nil {
		t.Fatalf("acquisition after a release without a window: marker %+v, err %v", m, err)
	}
}

// A marker that does not parse is consumed and reported; the shard is held.
func TestUnreadableMarkerStillAcquires(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	if _, err := cli.Put(ctx, ks.Released(4), `{"format":99,"stopped_at":"2026-01-01T00:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	tok, m, err := s.Acquire(ctx, 4, "n")
	if err == nil || m != nil || tok.Generation == 0 {
		t.Fatalf("acquire over a newer-format marker: token %v marker %v err %v; want the token and an error", tok, m, err)
	}
}
