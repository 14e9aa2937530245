package lease

import (
	"fmt"
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

// A marker names the ticks handed over; a marker an earlier release wrote
// (no handed field) parses and names nothing; one whose list would be too
// large names nothing rather than failing the release.
func TestMarkerHanded(t *testing.T) {
	stopped := time.Date(2026, 6, 1, 12, 0, 5, 0, time.UTC)
	tick := stopped.Add(time.Second)
	m, err := ParseMarker(Marker{StoppedAt: stopped, Generation: 7, Handed: map[string][]time.Time{"a": {tick}}}.Encode())
	if err != nil || len(m.Handed["a"]) != 1 || !m.Handed["a"][0].Equal(tick) {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
	old, err := ParseMarker([]byte(`{"stopped_at":"2026-06-01T12:00:05Z","generation":7,"format":1}`))
	if err != nil || old.Handed != nil || !old.StoppedAt.Equal(stopped) {
		t.Fatalf("an earlier release's marker: %+v, %v", old, err)
	}
	big := map[string][]time.Time{}
	for i := range 20000 {
		big[fmt.Sprintf("job-%05d", i)] = []time.Time{tick}
	}
	b := Marker{StoppedAt: stopped, Generation: 7, Handed: big}.Encode()
	if len(b) > MaxHandedBytes {
		t.Fatalf("encoded marker of %d bytes, over %d", len(b), MaxHandedBytes)
	}
	if m, err := ParseMarker(b); err != nil || m.Handed != nil || !m.StoppedAt.Equal(stopped) {
		t.Fatalf("an oversized list: %+v, %v; want the marker without it", m, err)
	}
}

// Releases whose markers name many handed ticks are batched by size, so
// that no transaction passes etcd's request limit (1.5 MiB by default):
// ten markers of about 200 KiB each are released in one call.
func TestReleaseBatchesLargeMarkers(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Start(t).Client(t)
	ctx := tctx(t)
	cfg, _ := testCfg(3 * time.Second)
	s := newSession(t, cli, cfg)
	stopped := time.Date(2026, 6, 1, 12, 0, 5, 0, time.UTC)
	handed := map[string][]time.Time{}
	for i := range 4000 {
		handed[fmt.Sprintf("tenant-%05d.nightly-report", i)] = []time.Time{stopped.Add(time.Second)}
	}
	if n := len(Marker{StoppedAt: stopped, Handed: handed}.Encode()); n < 150<<10 || n > MaxHandedBytes {
		t.Fatalf("a marker of %d bytes: the test wants 150 KiB to %d", n, MaxHandedBytes)
	}
	var rs []Release
	for shard := range 10 {
		tok, _, err := s.Acquire(ctx, shard, "a")
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, Release{Token: tok, StoppedAt: stopped, Handed: handed})
	}
	errs, err := s.Release(ctx, rs)
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("shard %d: %v", i, e)
		}
	}
}
