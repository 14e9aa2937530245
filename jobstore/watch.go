package jobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Backoff between attempts after an etcd error (no leader, connection lost).
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// WatchOption tunes Watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	log *slog.Logger
	bad *baddata.Reporter
}

// WithLogger makes Watch log the etcd errors it retries.
func WithLogger(l *slog.Logger) WatchOption { return func(c *watchConfig) { c.log = l } }

// WithBadData makes Watch report a stored job set it cannot use (ErrCorrupt,
// ErrFormat) to r, once per pointer revision.
func WithBadData(r *baddata.Reporter) WatchOption { return func(c *watchConfig) { c.bad = r } }

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
// errors it retries with backoff (100 ms doubling to 5 s). A deleted
// pointer is never delivered: versions only go up. It returns nil once ctx
// is done.
//
// A stored set this binary cannot use — one that fails its checks
// (ErrCorrupt: a pointer or chunk edited by hand, a digest that does not
// match) or is in a newer format (ErrFormat) — is reported (WithBadData;
// logged and counted once per pointer revision) and skipped: nothing is
// delivered, the caller keeps the last good set, and Watch waits for the
// pointer to move (the next apply) rather than reading the bad version
// again. Exiting instead would stop every replica of the cluster at once,
// since they all watch the same pointer.
func Watch(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), opts ...WatchOption) error {
	cfg := watchConfig{log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	last := int64(-1)
	backoff := watchBackoffMin
	for {
		err := watchOnce(ctx, cli, ks, fn, &last, &cfg)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errRelist):
			backoff = watchBackoffMin
			continue
		}
		cfg.log.Warn("job set watch failed; retrying", "err", err, "retry_in_ms", backoff.Milliseconds())
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
func watchOnce(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), last *int64, cfg *watchConfig) error {
	set, p, err := loadCurrent(ctx, cli, ks)
	switch {
	case unusable(err) && p.readRev != 0:
		cfg.reportBad(ks, p, *last, err) // and watch on from here for a good one
	case err != nil:
		return err
	case set.Version > *last:
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
		np.modRev = kv.Kv.ModRevision
		if err != nil {
			cfg.reportBad(ks, np, *last, err)
			continue
		}
		if np.Version < *last {
			// Flips only move forward: a pointer moved back is foreign.
			cfg.reportBad(ks, np, *last, fmt.Errorf("%w: pointer moved back to version %d", ErrCorrupt, np.Version))
			continue
		}
		// The same version rewritten (no apply does that) is read to check
		// it, never delivered again.
		set, err := readVersion(ctx, cli, ks, np, kv.Kv.ModRevision)
		if errors.Is(err, rpctypes.ErrCompacted) {
			return errRelist
		}
		if unusable(err) {
			cfg.reportBad(ks, np, *last, err)
			continue
		}
		if err != nil {
			return err
		}
		if set.Version == *last {
			continue
		}
		*last = set.Version
		fn(set)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("jobstore: watch of %s closed", ks.JobsCurrent())
}

// unusable reports whether err says the stored set itself is bad (a retry
// reads the same bytes), as opposed to etcd failing to answer.
func unusable(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrFormat)
}

// reportBad reports the job set that p points to as unusable; running is
// the version the caller keeps (0: none yet).
func (c *watchConfig) reportBad(ks keyspace.Space, p pointer, running int64, err error) {
	action := "skipped: this replica keeps running its last good job set (version " + fmt.Sprint(max(running, 0)) +
		"); `shardcron apply --replace-corrupt -f FILE` replaces it"
	if running < 0 {
		action = "skipped: this replica has no job set yet and takes no shards until one is readable; `shardcron apply --replace-corrupt -f FILE` replaces it"
	}
	if errors.Is(err, ErrFormat) {
		action = strings.Replace(action, "`shardcron apply --replace-corrupt -f FILE` replaces it", "upgrade this replica to read it", 1)
	}
	if !c.bad.Report(baddata.JobSet, ks.JobsCurrent(), p.modRev, err, action) && c.bad == nil {
		c.log.Error("stored job set is unusable", "err", err, "action", action)
	}
}
