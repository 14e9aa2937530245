package jobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Backoff between attempts after an etcd error (no leader, connection lost).
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// WatchOption tunes Watch.
type WatchOption func(*watchConfig)

type watchConfig struct{ log *slog.Logger }

// WithLogger makes Watch log the etcd errors it retries.
func WithLogger(l *slog.Logger) WatchOption { return func(c *watchConfig) { c.log = l } }

// errRelist ends one watch so that Watch lists again without backing off.
var errRelist = errors.New("jobstore: watch compacted, re-listing")

// Watch calls fn with the cluster's current job set (Version 0 and no jobs
// if there is none yet), then with every newer version as it is applied.
//
// Contract: fn is called on the goroutine that called Watch, one call at a
// time, with strictly increasing versions, never twice with the same one;
// Watch starts no goroutine that outlives it. A slow fn delays the next
// call and no version is lost meanwhile, except that versions superseded
// before Watch could read them (several flips in one watch response, or
// after a compaction) are skipped in favour of the newest. fn owns the
// JobSet it is given.
//
// Watch reads only jobs/current (with clientv3.WithRequireLeader, so a
// member cut off from its leader is noticed), and each version's chunks at
// the revision its pointer was written, so every set is exactly one
// applied version. On a compacted revision it lists again; on other etcd
// errors, and on a stored set that fails its checks (ErrCorrupt, logged
// as an error; the last good set stays in force), it retries with backoff
// (100 ms doubling to 5 s). A deleted pointer is never delivered: versions
// only go up. It returns nil once ctx is done, or ErrFormat when the
// cluster's job set is newer than this binary, which retrying cannot cure.
func Watch(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), opts ...WatchOption) error {
	cfg := watchConfig{log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	last := int64(-1)
	backoff := watchBackoffMin
	for {
		err := watchOnce(ctx, cli, ks, fn, &last)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrFormat):
			return err
		case errors.Is(err, errRelist):
			backoff = watchBackoffMin
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			// Keep the last good set and retry: the next apply repairs
			// the data, and exiting would stop every replica at once.
			cfg.log.Error("stored job set is unreadable; keeping the last good one until a new apply", "err", err, "retry_in_ms", backoff.Milliseconds())
		} else {
			cfg.log.Warn("job set watch failed; retrying", "err", err, "retry_in_ms", backoff.Milliseconds())
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// watchOnce lists the current set, delivers it if new, then follows the
// pointer until the watch fails; it always returns an error (ctx's when
// done).
func watchOnce(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), last *int64) error {
	set, p, err := loadCurrent(ctx, cli, ks)
	if err != nil {
		return err
	}
	if set.Version > *last {
		*last = set.Version
		fn(set)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel() // ends the etcd watch on every return
	for resp := range cli.Watch(wctx, ks.JobsCurrent(), clientv3.WithRev(p.readRev+1)) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return errRelist
		}
		if err := resp.Err(); err != nil {
			return err
		}
		// Only the newest pointer of a response matters: the versions
		// before it are already superseded.
		var kv *clientv3.Event
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				kv = ev
			}
		}
		if kv == nil {
			continue
		}
		np, err := decodePointer(kv.Kv.Value)
		if err != nil {
			return err
		}
		if np.Version <= *last {
			continue
		}
		set, err := readVersion(ctx, cli, ks, np, kv.Kv.ModRevision)
		if errors.Is(err, rpctypes.ErrCompacted) {
			return errRelist
		}
		if err != nil {
			return err
		}
		*last = set.Version
		fn(set)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("jobstore: watch of %s closed", ks.JobsCurrent())
}
