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

// Watch calls fn with the cluster's effective job set (Version 0 and no
// jobs if there is none yet): the applied version with its overrides
// (`shardcron suspend`/`resume`) applied (Effective), then again on every
// apply and every override change.
//
// Contract: fn is called on the goroutine that called Watch, one call at a
// time, with strictly increasing Revisions (Version does not decrease; an
// override change delivers the same Version again, with a new Revision);
// Watch starts no goroutine that outlives it. A slow fn delays the next
// call and no change is lost meanwhile, except that versions superseded
// before Watch could read them (several flips in one watch response, or
// after a compaction) are skipped in favour of the newest. fn may keep the
// JobSet it is given but must not modify its Jobs, which later deliveries
// may share.
//
// Watch reads one key range, jobs/current and jobs/overrides/
// (keyspace.JobsWatchEnd; with clientv3.WithRequireLeader, so a member cut
// off from its leader is noticed), and each version's chunks at the
// revision its pointer was written, so every set is exactly one applied
// version. On a compacted revision it lists again; on other etcd
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
	last := delivered{rev: -1}
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

// watchOnce lists the current set and the overrides, delivers the
// effective set if new, then follows the pointer and the overrides in one
// watch range until the watch fails; it always returns an error (ctx's
// when done).
// delivered is what Watch last handed to fn: its revision, and what a
// listing compares to tell whether anything changed since.
type delivered struct {
	rev, version, ovRev int64
	ovN                 int
}

func watchOnce(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), last *delivered) error {
	base, p, err := loadCurrent(ctx, cli, ks)
	if err != nil {
		return err
	}
	ovs, err := loadOverrides(ctx, cli, ks, p.readRev)
	if err != nil {
		return err
	}
	// Each delivery carries the revision it reflects (a listing's read
	// revision, a watch response's newest event), so deliveries strictly
	// increase however often the watch lists again. Without a set, only
	// the first empty set is delivered.
	deliver := func(rev int64) {
		if rev <= last.rev || (base.Version == 0 && last.rev >= 0) {
			return
		}
		*last = delivered{rev: rev, version: base.Version, ovRev: ovs.maxRev, ovN: len(ovs.byJob)}
		set := Effective(base, ovs.byJob)
		set.Revision = rev
		fn(set)
	}
	// A listing after a watch failure delivers only what changed meanwhile
	// (a deleted override lowers the count), not the same set again.
	if (delivered{last.rev, base.Version, ovs.maxRev, len(ovs.byJob)}) != *last || last.rev < 0 {
		deliver(p.readRev)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel() // ends the etcd watch on every return
	for resp := range cli.Watch(wctx, ks.JobsCurrent(), clientv3.WithRange(ks.JobsWatchEnd()), clientv3.WithRev(p.readRev+1)) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return errRelist
		}
		if err := resp.Err(); err != nil {
			return err
		}
		rev, changed, err := applyEvents(ctx, cli, ks, resp.Events, &base, &ovs)
		if err != nil {
			return err
		}
		if changed {
			deliver(rev)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("jobstore: watch of %s closed", ks.JobsCurrent())
}

// applyEvents folds one watch response into base and ovs: overrides as
// they come, and only the newest pointer of the response (the versions
// before it are already superseded), whose set is read at its revision.
// It returns the newest event's revision and whether anything changed.
func applyEvents(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, evs []*clientv3.Event, base *config.JobSet, ovs *overrideState) (int64, bool, error) {
	var (
		ptr     *clientv3.Event
		rev     int64
		changed bool
	)
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		rev = max(rev, ev.Kv.ModRevision)
		if key == ks.JobsCurrent() {
			if ev.Type == clientv3.EventTypePut {
				ptr = ev
			}
			continue
		}
		job, ok := ks.JobOverrideFromKey(key)
		if !ok {
			continue
		}
		changed = true
		if ev.Type == clientv3.EventTypeDelete {
			delete(ovs.byJob, job)
			continue
		}
		o, err := decodeOverride(key, ev.Kv.Value)
		if err != nil {
			return 0, false, err
		}
		ovs.byJob[job] = o
	}
	if ptr == nil {
		return rev, changed, nil
	}
	np, err := decodePointer(ptr.Kv.Value)
	if err != nil {
		return 0, false, err
	}
	if np.Version <= base.Version {
		return rev, changed, nil
	}
	set, err := readVersion(ctx, cli, ks, np, ptr.Kv.ModRevision)
	if errors.Is(err, rpctypes.ErrCompacted) {
		return 0, false, errRelist
	}
	if err != nil {
		return 0, false, err
	}
	*base = set
	return rev, true, nil
}
