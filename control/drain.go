package control

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/shard"
)

// DrainFlag is the value of a drain flag; only its existence matters to
// replicas.
type DrainFlag struct {
	Format int       `json:"format"`
	At     time.Time `json:"at"`
	By     string    `json:"by,omitempty"`
}

// DrainState is a node's drain flag and ownership.
type DrainState struct {
	Node    string `json:"node"`
	Drained bool   `json:"drained"`
	// Member: the node is a member of the cluster now.
	Member bool `json:"member"`
	// Shards is how many shards it holds; Desired how many the assignment
	// gives it (0 while drained).
	Shards  int `json:"shards"`
	Desired int `json:"desired"`
}

// Drain sets node's drain flag: it hands over every shard and takes none
// until Undrain. It refuses (ErrLastMember) when no other member that is
// not drained would take the shards. A node that is not a member may be
// drained ahead of its start.
func Drain(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, node, by string) (DrainState, error) {
	if _, ok := ks.DrainFromKey(ks.Drain(node)); !ok || node == "" {
		return DrainState{}, fmt.Errorf("%w: %q is not a node id", ErrInvalid, node)
	}
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		return DrainState{}, err
	}
	ds := drainState(st, node)
	others := 0
	for _, m := range st.Members {
		if m.Node != node && !m.Drained {
			others++
		}
	}
	if ds.Member && others == 0 {
		return ds, fmt.Errorf("%w: refusing to drain %s: every other member is drained or there is none, so its shards would have no owner (undrain another member first)", ErrLastMember, node)
	}
	val, _ := json.Marshal(DrainFlag{Format: 1, At: time.Now().UTC(), By: by})
	if _, err := cli.Put(ctx, ks.Drain(node), string(val)); err != nil {
		return ds, fmt.Errorf("control: write drain flag: %w", err)
	}
	ds.Drained = true
	return ds, nil
}

// Undrain deletes node's drain flag; it takes shards again. Undraining a
// node that is not drained changes nothing.
func Undrain(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, node string) (DrainState, error) {
	if _, err := cli.Delete(ctx, ks.Drain(node)); err != nil {
		return DrainState{}, fmt.Errorf("control: delete drain flag: %w", err)
	}
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		return DrainState{}, err
	}
	return drainState(st, node), nil
}

// WaitDrained polls until node holds no shard (drained) or, after an
// undrain, holds every shard the assignment gives it, or ctx ends.
func WaitDrained(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, node string, every time.Duration) (DrainState, error) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last DrainState
	for {
		st, err := shard.ReadState(ctx, cli, ks)
		if err == nil {
			last = drainState(st, node)
			if done(st, last) {
				return last, nil
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			what := "hold every shard it should"
			if last.Drained {
				what = "hand over every shard"
			}
			return last, fmt.Errorf("control: %s did not %s in time (holds %d, desired %d): %w", node, what, last.Shards, last.Desired, err)
		}
	}
}

// done reports whether node's ownership matches its flag: none held while
// drained; every shard desired by it held by it otherwise.
func done(st shard.State, ds DrainState) bool {
	if ds.Drained {
		return ds.Shards == 0
	}
	for _, s := range st.ShardSet {
		if s.Desired == ds.Node && s.Owner != ds.Node {
			return false
		}
	}
	return true
}

func drainState(st shard.State, node string) DrainState {
	ds := DrainState{Node: node}
	for _, m := range st.Members {
		if m.Node == node {
			ds.Member, ds.Drained = true, m.Drained
		}
	}
	for _, s := range st.ShardSet {
		if s.Owner == node {
			ds.Shards++
		}
		if s.Desired == node {
			ds.Desired++
		}
	}
	return ds
}
