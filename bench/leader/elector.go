package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// errNotLeader is what IsLeader answers on a follower: gocron then skips
// the run.
var errNotLeader = errors.New("leader: not the leader")

// elector implements gocron.Elector with etcd's concurrency.Election, as
// a user of gocron would write it (the maintained gocron-etcd-elector is
// not on the module proxy): campaign, lead until the session ends, campaign
// again.
type elector struct {
	cli    *clientv3.Client
	prefix string
	node   string
	ttl    int
	mu     sync.Mutex
	rev    int64 // the leader key's revision while leading, else 0
}

func newElector(cli *clientv3.Client, prefix, node string, ttl int) *elector {
	return &elector{cli: cli, prefix: prefix, node: node, ttl: ttl}
}

// IsLeader is called by gocron before every run.
func (e *elector) IsLeader(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rev == 0 {
		return errNotLeader
	}
	return nil
}

func (e *elector) token() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rev
}

// run campaigns until ctx ends.
func (e *elector) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := e.term(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "leader: election: %v\n", err)
			time.Sleep(200 * time.Millisecond) // back off before campaigning again
		}
	}
}

// term is one session: campaign, lead until the session is gone.
func (e *elector) term(ctx context.Context) error {
	sess, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl))
	if err != nil {
		return err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, e.prefix)
	if err := el.Campaign(ctx, e.node); err != nil {
		return err
	}
	e.mu.Lock()
	e.rev = el.Rev()
	e.mu.Unlock()
	fmt.Printf("elected %d\n", time.Now().UnixNano())
	select {
	case <-sess.Done():
	case <-ctx.Done():
	}
	e.mu.Lock()
	e.rev = 0 // no run starts from here on
	e.mu.Unlock()
	if ctx.Err() != nil {
		// Shutting down: resign at once, so the next candidate is elected
		// without waiting for the TTL.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		at := time.Now() // the successor may be elected before Resign returns
		if el.Resign(rctx) == nil {
			fmt.Printf("resigned %d\n", at.UnixNano())
		}
	}
	return nil
}
