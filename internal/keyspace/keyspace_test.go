package keyspace

import "testing"

func TestShardKeysRoundTrip(t *testing.T) {
	s := New("prod")
	for _, shard := range []int{0, 7, 1023, MaxShards - 1} {
		got, ok := s.ShardFromKey(s.Shard(shard))
		if !ok || got != shard {
			t.Fatalf("ShardFromKey(Shard(%d)) = %d, %v", shard, got, ok)
		}
	}
	if _, ok := s.ShardFromKey(s.Members() + "node-1"); ok {
		t.Fatal("a member key parsed as a shard key")
	}
	if got := s.Shard(12); got != "/shardcron/prod/own/shards/00012" {
		t.Fatalf("Shard(12) = %q", got)
	}
	if got := s.Released(3); got != "/shardcron/prod/ticks/00003/_released" {
		t.Fatalf("Released(3) = %q", got)
	}
}

func TestMemberFromKey(t *testing.T) {
	s := New("prod")
	if n, ok := s.MemberFromKey(s.Member("node-1")); !ok || n != "node-1" {
		t.Fatalf("MemberFromKey = %q, %v", n, ok)
	}
	if _, ok := s.MemberFromKey(s.Shard(1)); ok {
		t.Fatal("a shard key parsed as a member key")
	}
}

func TestValidCluster(t *testing.T) {
	for _, ok := range []string{"a", "prod", "eu-1.billing_x"} {
		if err := ValidCluster(ok); err != nil {
			t.Errorf("ValidCluster(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Prod", "-x", "a/b", "a b"} {
		if ValidCluster(bad) == nil {
			t.Errorf("ValidCluster(%q) = nil, want an error", bad)
		}
	}
}

func TestJobKeys(t *testing.T) {
	s := New("prod")
	if got := s.JobChunk(42, 3); got != "/shardcron/prod/jobs/sets/00000000000000000042/000003" {
		t.Fatalf("JobChunk = %q", got)
	}
	if got := s.JobPart(42, 7, 1); got != "/shardcron/prod/jobs/sets/00000000000000000042/00007.0001" {
		t.Fatalf("JobPart = %q", got)
	}
	if got := s.JobPage(42, 3); got != "/shardcron/prod/jobs/sets/00000000000000000042/p00003" {
		t.Fatalf("JobPage = %q", got)
	}
	if s.JobSet(9) >= s.JobSet(10) {
		t.Fatal("job set versions do not sort numerically")
	}
	if shard, job, ok := s.TickFromKey(s.Tick(17, "sweep")); !ok || shard != 17 || job != "sweep" {
		t.Fatalf("TickFromKey = %d %q %v", shard, job, ok)
	}
	for _, k := range []string{s.Released(3), s.ShardTicks(3), s.Shard(3), s.Ticks() + "x/y"} {
		if _, _, ok := s.TickFromKey(k); ok {
			t.Fatalf("TickFromKey(%q) parsed as a job record", k)
		}
	}
}

// TestJobsWatchRange: the replicas' one watch range holds the pointer and
// every override, and no chunk, no seq key and nothing of another prefix.
func TestJobsWatchRange(t *testing.T) {
	s := New("prod")
	in := func(k string) bool { return k >= s.JobsCurrent() && k < s.JobsWatchEnd() }
	for _, k := range []string{s.JobsCurrent(), s.JobOverride("a"), s.JobOverride("zz.9-_x")} {
		if !in(k) {
			t.Errorf("%q is outside the watch range", k)
		}
	}
	for _, k := range []string{s.JobsSeq(), s.JobChunk(7, 0), s.JobSets(), s.Tick(0, "a"), s.Meta(), s.Member("n")} {
		if in(k) {
			t.Errorf("%q is inside the watch range", k)
		}
	}
	if j, ok := s.JobOverrideFromKey(s.JobOverride("job-1")); !ok || j != "job-1" {
		t.Errorf("JobOverrideFromKey = %q, %v", j, ok)
	}
	if _, ok := s.JobOverrideFromKey(s.JobsCurrent()); ok {
		t.Error("the pointer parsed as an override key")
	}
}
