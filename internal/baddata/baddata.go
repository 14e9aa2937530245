// Package baddata reports data under a cluster's prefix in etcd that
// shardcron cannot use: a value that does not decode, is in a newer format
// than this binary reads, or breaks an invariant shardcron's own writers
// keep (a shard key with no owner or no lease, a job set whose digest does
// not match). Such data is foreign: written by hand, by another program, by
// a newer release, or damaged.
//
// The packages that read etcd (shard, jobstore) decide, per kind, whether
// bad data is refused with a clear error or skipped, and what they do
// instead; the rule for each kind is written where it is applied and
// gathered in docs/operating.md ("Bad data in etcd"). They never crash on it, and
// never overwrite it without saying so. This package only says so: one log
// line and one count per bad value.
//
// Reporting is deduplicated by key and ModRevision: a bad key read again
// (every resync, every page view) is logged and counted once, until its
// value changes. The set of values already reported is bounded (maxSeen);
// past that it is cleared, and a bad value still there is reported once
// more — a bounded repeat, never an unbounded memory.
package baddata

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind names what was bad; it is the metric's kind label, from a fixed set.
type Kind string

// The kinds of bad data, one per kind of key.
const (
	// Meta: the cluster's meta key (unreadable, newer, rewritten, deleted).
	Meta Kind = "meta"
	// Member: a member key, own/members/<node>.
	Member Kind = "member"
	// ShardKey: a shard lease key, own/shards/<shard>.
	ShardKey Kind = "shard_key"
	// Released: a release marker, ticks/<shard>/_released.
	Released Kind = "released_marker"
	// Record: a job's checkpoint record, ticks/<shard>/<job>.
	Record Kind = "job_record"
	// JobSet: the job set's pointer or chunks, jobs/.
	JobSet Kind = "job_set"
	// History: a run history segment, runs/<shard>/<job>/<segment>.
	History Kind = "history"
	// Journal: a value of the completion journal, journal/.
	Journal Kind = "journal"
)

// Kinds lists every kind; each has a series from the start, at 0.
var Kinds = []Kind{Meta, Member, ShardKey, Released, Record, JobSet, History, Journal}

// maxSeen bounds the values remembered as reported.
const maxSeen = 4096

// Reporter logs and counts bad data. A nil *Reporter reports nothing; the
// methods are safe for concurrent use and never block on anything but a
// short mutex and the logger.
type Reporter struct {
	log   *slog.Logger
	total *prometheus.CounterVec

	mu     sync.Mutex
	seen   map[seenKey]struct{}
	counts map[Kind]int
}

type seenKey struct {
	key string
	rev int64
}

// New returns a Reporter logging to log (nil: discarded) and counting in
// shardcron_etcd_bad_data_total{kind}, registered with reg (nil: not
// registered).
func New(reg prometheus.Registerer, log *slog.Logger) (*Reporter, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reporter{
		log: log,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardcron", Subsystem: "etcd", Name: "bad_data_total",
			Help: "Values under the cluster's prefix in etcd that this replica could not use (did not decode, newer format, broken invariant), by kind; each value counts once, however often it is read. The log names the key.",
		}, []string{"kind"}),
		seen:   map[seenKey]struct{}{},
		counts: map[Kind]int{},
	}
	for _, k := range Kinds {
		r.total.WithLabelValues(string(k))
	}
	if reg != nil {
		if err := reg.Register(r.total); err != nil {
			return nil, fmt.Errorf("baddata: register metrics: %w", err)
		}
	}
	return r, nil
}

// Report says that key's value at revision rev (its ModRevision; 0 when
// unknown) is bad: why is the problem, action what the replica does about
// it. The first report of a (key, rev) logs one error and counts one; the
// repeats do nothing. It reports whether this was the first.
func (r *Reporter) Report(kind Kind, key string, rev int64, why error, action string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	k := seenKey{key, rev}
	_, dup := r.seen[k]
	if !dup {
		if len(r.seen) >= maxSeen {
			clear(r.seen)
		}
		r.seen[k] = struct{}{}
		r.counts[kind]++
	}
	r.mu.Unlock()
	if dup {
		return false
	}
	r.total.WithLabelValues(string(kind)).Inc()
	r.log.Error("bad data in etcd", "kind", string(kind), "key", key, "revision", rev, "err", why, "action", action)
	return true
}

// Count is how many bad values of kind were reported (for tests and the
// status of a replica).
func (r *Reporter) Count(kind Kind) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[kind]
}
