package keyspace

import "testing"

func TestTriggerKeysRoundTrip(t *testing.T) {
	s := New("prod")
	key := s.Trigger(12, "invoice-sweep", "9f2c4a")
	if key != "/shardcron/prod/triggers/00012/invoice-sweep/9f2c4a" {
		t.Fatalf("Trigger = %q", key)
	}
	shard, job, id, ok := s.TriggerFromKey(key)
	if !ok || shard != 12 || job != "invoice-sweep" || id != "9f2c4a" {
		t.Fatalf("TriggerFromKey = %d %q %q %v", shard, job, id, ok)
	}
	for _, bad := range []string{
		s.ShardTriggers(12),
		s.ShardTriggers(12) + "job",
		s.ShardTriggers(12) + "job/",
		s.ShardTriggers(12) + "/id",
		s.ShardTriggers(12) + "job/id/more",
		s.Triggers() + "x0012/job/id",
		s.Tick(12, "job"),
	} {
		if _, _, _, ok := s.TriggerFromKey(bad); ok {
			t.Errorf("TriggerFromKey(%q) parsed", bad)
		}
	}
}

func TestDrainKeys(t *testing.T) {
	s := New("prod")
	if got := s.Drain("node-1"); got != "/shardcron/prod/own/drain/node-1" {
		t.Fatalf("Drain = %q", got)
	}
	if n, ok := s.DrainFromKey(s.Drain("node-1")); !ok || n != "node-1" {
		t.Fatalf("DrainFromKey = %q, %v", n, ok)
	}
	// Drain flags are under own/ (every replica watches it) but are
	// neither member nor shard keys.
	if _, ok := s.MemberFromKey(s.Drain("node-1")); ok {
		t.Fatal("a drain flag parsed as a member key")
	}
	if _, ok := s.ShardFromKey(s.Drain("node-1")); ok {
		t.Fatal("a drain flag parsed as a shard key")
	}
	if _, ok := s.DrainFromKey(s.Drains()); ok {
		t.Fatal("the prefix parsed as a drain flag")
	}
}
