package keyspace

import "testing"

func TestRunSegmentRoundTrip(t *testing.T) {
	s := New("prod")
	key := s.RunSegment(12, "invoice-sweep", 1764513455123456789, 7)
	if want := "/shardcron/prod/runs/00012/invoice-sweep/187ccfa37e07e315-7"; key != want {
		t.Fatalf("RunSegment = %q, want %q", key, want)
	}
	shard, job, seq, n, ok := s.RunSegmentFromKey(key)
	if !ok || shard != 12 || job != "invoice-sweep" || seq != 1764513455123456789 || n != 7 {
		t.Fatalf("RunSegmentFromKey = %d %q %d %d %v", shard, job, seq, n, ok)
	}
	// Keys sort by seq whatever the count.
	if a, b := s.RunSegment(1, "j", 9, 100), s.RunSegment(1, "j", 10, 1); a >= b {
		t.Fatalf("%q sorts after %q", a, b)
	}
	for _, bad := range []string{s.Tick(1, "j"), s.JobRuns(1, "j"), s.JobRuns(1, "j") + "zz-1", s.JobRuns(1, "j") + "0000000000000001-0"} {
		if _, _, _, _, ok := s.RunSegmentFromKey(bad); ok {
			t.Errorf("%q parsed as a segment key", bad)
		}
	}
}
