package jobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
	log  *slog.Logger
	bad  *baddata.Reporter
	sink sink
}

// WithLogger makes Watch log the etcd errors it retries.
func WithLogger(l *slog.Logger) WatchOption { return func(c *watchConfig) { c.log = l } }

// WithBadData makes Watch report a stored job set it cannot use (ErrCorrupt,
// ErrFormat) to r, once per pointer revision.
func WithBadData(r *baddata.Reporter) WatchOption { return func(c *watchConfig) { c.bad = r } }

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
// version. On a compacted revision it lists again; on other etcd errors it
// retries with backoff (100 ms doubling to 5 s). A deleted pointer is
// never delivered: versions only go up. It returns nil once ctx is done.
//
// A stored set this binary cannot use — one that fails its checks
// (ErrCorrupt: a pointer or chunk edited by hand, a digest that does not
// match) or is in a newer format (ErrFormat) — is reported (WithBadData;
// logged and counted once per pointer revision) and skipped: the caller
// keeps the last good set (overrides still apply to it), and Watch waits
// for the pointer to move (the next apply) rather than reading the bad
// version again. Exiting instead would stop every replica of the cluster
// at once, since they all watch the same pointer. An override that does
// not decode is reported too, but fails the read (retried with backoff):
// an unreadable suspension must not silently become a running job.
func Watch(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, fn func(config.JobSet), opts ...WatchOption) error {
	return watch(ctx, cli, ks, wholeSink(fn), opts...)
}

// sink is what a watch hands its sets to: Watch's fn, whole, or
// WatchHeld's (held.go).
type sink interface {
	// holding says which parts' jobs the next read keeps (nil: all);
	// took says the good set is now the last read's.
	holding() *holding
	took()
	// tookSome says the last read held part of its holding only.
	tookSome()
	// changes signals that holding changed (nil: never).
	changes() <-chan struct{}
	// deliver hands set over, with the parts cache and the pointer it was
	// read from (format) and the overrides applied to it.
	// again: only the holding changed since the last delivery.
	deliver(set config.JobSet, cache partCache, p pointer, ovs map[string]Override, again bool)
	// pending reports a holding read but not delivered yet.
	pending() bool
}

// wholeSink delivers every job.
type wholeSink func(config.JobSet)

func (wholeSink) holding() *holding        { return nil }
func (wholeSink) took()                    {}
func (wholeSink) tookSome()                {}
func (wholeSink) changes() <-chan struct{} { return nil }
func (wholeSink) pending() bool            { return false }
func (f wholeSink) deliver(set config.JobSet, _ partCache, _ pointer, _ map[string]Override, _ bool) {
	f(set)
}

func watch(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, sk sink, opts ...WatchOption) error {
	cfg := watchConfig{log: slog.New(slog.DiscardHandler), sink: sk}
	for _, o := range opts {
		o(&cfg)
	}
	st := watchState{last: delivered{rev: -1}}
	backoff := watchBackoffMin
	for {
		err := watchOnce(ctx, cli, ks, &st, &cfg)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errRelist):
			backoff = watchBackoffMin
			continue
		}
		if bv := (badOverride{}); errors.As(err, &bv) && cfg.bad != nil {
			cfg.bad.Report(baddata.JobSet, bv.key, bv.rev, bv.err, // once, however often retried
				"the job set watch waits for it to be fixed (delete the key, then `shardcron suspend` the job again if it should stay suspended); this replica keeps its last job set")
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

// delivered is what Watch last handed to fn: its revision, and what a
// listing compares to tell whether anything changed since.
type delivered struct {
	rev, version, ovRev int64
	ovN                 int
}

// watchState is what Watch carries from one watch to the next: what it
// delivered last, and the last usable applied set (nil until one was
// read), which a bad pointer leaves in force.
type watchState struct {
	last  delivered
	good  *config.JobSet
	parts partCache // the parts of good (format 2, 3), so a change reads only its own
	pages pageCache // the pages of good (format 3), likewise
	ptr   pointer   // the pointer good was read from
}

// running is the version the caller keeps (-1: none yet).
func (s *watchState) running() int64 {
	if s.good == nil {
		return -1
	}
	return s.good.Version
}

// watchOnce lists the current set and the overrides, delivers the
// effective set if new, then follows the pointer and the overrides in one
// watch range until the watch fails; it always returns an error (ctx's
// when done).
func watchOnce(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, st *watchState, cfg *watchConfig) error {
	if st.parts == nil {
		st.parts, st.pages = partCache{}, pageCache{}
	}
	base, p, err := loadHeld(ctx, cli, ks, readCache{st.parts, st.pages}, cfg.sink.holding())
	switch {
	case unusable(err) && p.readRev != 0:
		cfg.reportBad(ks, p, st.running(), err) // and watch on from here for a good one
	case err != nil:
		return err
	default:
		st.good, st.ptr = &base, p
		cfg.sink.took()
	}
	ovs, err := loadOverrides(ctx, cli, ks, p.readRev)
	if err != nil {
		return err
	}
	last := &st.last
	// Each delivery carries the revision it reflects (a listing's read
	// revision, a watch response's newest event), so deliveries strictly
	// increase however often the watch lists again. Without a set, only
	// the first empty set is delivered; without a usable one, nothing.
	// A holding change (WatchHeld) delivers again at the same revision.
	deliver := func(rev int64, again bool) {
		if st.good == nil || (rev <= last.rev && !again) || (st.good.Version == 0 && last.rev >= 0 && !again) {
			return
		}
		*last = delivered{rev: rev, version: st.good.Version, ovRev: ovs.maxRev, ovN: len(ovs.byJob)}
		set := Effective(*st.good, ovs.byJob)
		set.Revision = rev
		cfg.sink.deliver(set, st.parts, st.ptr, ovs.byJob, again)
	}
	// A listing after a watch failure delivers only what changed meanwhile
	// (a deleted override lowers the count), not the same set again.
	if st.good != nil && ((delivered{last.rev, st.good.Version, ovs.maxRev, len(ovs.byJob)}) != *last || last.rev < 0) {
		deliver(p.readRev, false)
	} else if st.good != nil && cfg.sink.pending() {
		deliver(last.rev, true)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel() // ends the etcd watch on every return
	wch := cli.Watch(wctx, ks.JobsCurrent(), clientv3.WithRange(ks.JobsWatchEnd()), clientv3.WithRev(p.readRev+1))
	for {
		var resp clientv3.WatchResponse
		select {
		case r, ok := <-wch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return fmt.Errorf("jobstore: watch of %s closed", ks.JobsCurrent())
			}
			resp = r
		case <-cfg.sink.changes():
			if err := rehold(ctx, cli, ks, st, cfg); err != nil {
				return err
			}
			if cfg.sink.pending() {
				deliver(last.rev, true)
			}
			continue
		}
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return errRelist
		}
		if err := resp.Err(); err != nil {
			return err
		}
		rev, changed, err := applyEvents(ctx, cli, ks, resp.Events, st, &ovs, cfg)
		if err != nil {
			return err
		}
		if changed {
			deliver(rev, false)
		}
	}
}

// rehold reads the good set's parts again for the sink's new holding:
// those it now holds and did not, from etcd at its newest revision (a part
// is never rewritten, and one collected since, because a newer pointer
// replaced it, makes the watch list again); those it no longer holds are
// dropped. A format 1 set is held whole.
func rehold(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, st *watchState, cfg *watchConfig) error {
	h := cfg.sink.holding()
	if st.good == nil {
		return nil
	}
	if st.ptr.Format < 2 {
		cfg.sink.took() // held whole
		return nil
	}
	set, more, err := readParts(ctx, cli, ks, st.ptr, 0, st.parts, h, partsPerRead)
	if errors.Is(err, ErrPartGone) {
		return errRelist
	}
	if err != nil {
		return err
	}
	st.good = &set
	if more {
		cfg.sink.tookSome()
	} else {
		cfg.sink.took()
	}
	return nil
}

// applyEvents folds one watch response into st and ovs: overrides as they
// come, and only the newest pointer of the response (the versions before
// it are already superseded), whose set is read at its revision. It
// returns the newest event's revision and whether anything changed.
func applyEvents(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, evs []*clientv3.Event, st *watchState, ovs *overrideState, cfg *watchConfig) (int64, bool, error) {
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
			return 0, false, badOverride{key, ev.Kv.ModRevision, err}
		}
		ovs.byJob[job] = o
	}
	if ptr == nil {
		return rev, changed, nil
	}
	set, np, ok, err := readPointer(ctx, cli, ks, ptr.Kv, st, cfg)
	if !ok || err != nil {
		return rev, changed, err
	}
	st.good, st.ptr = &set, np
	cfg.sink.took()
	return rev, true, nil
}

// readPointer reads the set a pointer put in the watch names. It reports
// (and returns !ok for) a pointer or set this binary cannot use, a pointer
// moved back, and the version running rewritten in place (read only to
// check it: no apply does that).
func readPointer(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, kv *mvccpb.KeyValue, st *watchState, cfg *watchConfig) (config.JobSet, pointer, bool, error) {
	running := st.running()
	np, err := decodePointer(kv.Value)
	np.modRev = kv.ModRevision
	if err != nil {
		cfg.reportBad(ks, np, running, err)
		return config.JobSet{}, np, false, nil
	}
	if np.Version < running {
		// Flips only move forward: a pointer moved back is foreign.
		cfg.reportBad(ks, np, running, fmt.Errorf("%w: pointer moved back to version %d", ErrCorrupt, np.Version))
		return config.JobSet{}, np, false, nil
	}
	set, err := readVersion(ctx, cli, ks, &np, kv.ModRevision, readCache{st.parts, st.pages}, cfg.sink.holding())
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return set, np, false, errRelist
	case unusable(err):
		cfg.reportBad(ks, np, running, err)
		return set, np, false, nil
	case err != nil:
		return set, np, false, err
	}
	return set, np, set.Version != running, nil
}

// badOverride is an override this binary cannot decode, with its key and
// ModRevision for the report.
type badOverride struct {
	key string
	rev int64
	err error
}

func (b badOverride) Error() string { return b.err.Error() }
func (b badOverride) Unwrap() error { return b.err }

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
