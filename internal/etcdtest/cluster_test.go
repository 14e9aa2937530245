package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
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
	poll.Must(t, 15*time.Second, "a new leader after the old one stopped", poll.True(func() bool {
		l := c.Leader()
		return l >= 0 && l != old
	}))
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatalf("put after a leader change: %v", err)
	}
	c.RestartMember(old)
	// The restarted member catches up: a serializable read on it alone
	// returns the latest value.
	one := NewClient(t, c.Endpoint(old))
	poll.Must(t, 30*time.Second, "the restarted member catches up", func() error {
		resp, err := one.Get(ctx, "k")
		if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2") {
			err = fmt.Errorf("read %v", resp.Kvs)
		}
		return err
	})
}
