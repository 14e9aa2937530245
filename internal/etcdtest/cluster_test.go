package etcdtest

import (
	"context"
	"testing"
	"time"
)

func TestClusterSurvivesLeaderStop(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Endpoints()) != 3 {
		t.Fatalf("endpoints: %v", c.Endpoints())
	}
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	old := c.WaitLeader(t, 10*time.Second)
	c.StopMember(old)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if l := c.Leader(); l >= 0 && l != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader 15s after the old one stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatalf("put after a leader change: %v", err)
	}
	c.RestartMember(old)
	// The restarted member catches up: a serializable read on it alone
	// returns the latest value.
	one := NewClient(t, c.Endpoint(old))
	for {
		resp, err := one.Get(ctx, "k")
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "2" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted member never caught up: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
