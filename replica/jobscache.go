package replica

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// The jobs page reads its rows' records and last runs from etcd, one
// snapshot a page. While etcd is slow or away it must neither hang nor
// fail: the reads are bounded (jobsReadTimeout), and a page whose reads
// did not answer is filled from the last read of each of its jobs (kept
// for at most maxCachedJobs jobs) and marked stale with its age.
const (
	jobsReadTimeout = 2 * time.Second
	maxCachedJobs   = 4096
)

// runsCache keeps the last read of each job's in-flight ticks and runs.
type runsCache struct {
	mu   sync.Mutex
	jobs map[string]cachedRuns
}

type cachedRuns struct {
	inFlight []scheduler.Flight
	lastRuns []scheduler.Entry
	items    *ItemsSummary
	err      string
	done     bool
	at       time.Time
}

func newRunsCache() *runsCache { return &runsCache{jobs: map[string]cachedRuns{}} }

// fill reads rows' records and last runs (refs name them, in order) and
// returns the page. st is the ownership view the rows' owners come from: a
// stale view makes the page stale too.
func (c *runsCache) fill(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, rows []JobView, refs []shard.RecordRef, st shard.State, bad *baddata.Reporter, total int) dashboard.JobsPage {
	now := time.Now()
	page := dashboard.JobsPage{Jobs: rows, Total: total, Fresh: dashboard.Freshness{AsOf: now}}
	rctx, cancel := context.WithTimeout(ctx, jobsReadTimeout)
	defer cancel()
	err := readRuns(rctx, cli, ks, rows, refs, LastRunsShown, bad, now)
	if err == nil {
		c.store(rows, now)
	} else {
		page.Fresh = c.load(rows, fmt.Sprintf("etcd did not answer within %v: %v; last runs as last read", jobsReadTimeout, err))
	}
	if st.Stale && (page.Fresh.AsOf.IsZero() || st.AsOf.Before(page.Fresh.AsOf)) {
		page.Fresh.Stale, page.Fresh.AsOf = true, st.AsOf
		if page.Fresh.Reason == "" {
			page.Fresh.Reason = "this replica has no valid lease: owners as it last saw them"
		}
	}
	return page
}

// store keeps what rows show, read at at.
func (c *runsCache) store(rows []JobView, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		if _, ok := c.jobs[r.Name]; !ok && len(c.jobs) >= maxCachedJobs {
			for name := range c.jobs { // evict one, any: the cache is a courtesy
				delete(c.jobs, name)
				break
			}
		}
		c.jobs[r.Name] = cachedRuns{inFlight: r.InFlight, lastRuns: r.LastRuns, items: r.Items, err: r.Error, done: r.Done, at: at}
	}
}

// load fills rows from their last reads and says how stale the page is:
// as of its oldest row (zero when a row was never read).
func (c *runsCache) load(rows []JobView, reason string) dashboard.Freshness {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := dashboard.Freshness{Stale: true, Reason: reason}
	for i, r := range rows {
		cr, ok := c.jobs[r.Name]
		if !ok {
			f.AsOf = time.Time{}
			continue
		}
		rows[i].InFlight, rows[i].Error, rows[i].Done = cr.inFlight, cr.err, cr.done
		rows[i].LastRuns = append([]scheduler.Entry{}, cr.lastRuns...)
		if cr.items != nil && rows[i].Items != nil { // counts as last read; owned_here as now
			s := *cr.items
			s.OwnedHere = rows[i].Items.OwnedHere
			rows[i].Items = &s
		}
		if i == 0 || (!f.AsOf.IsZero() && cr.at.Before(f.AsOf)) {
			f.AsOf = cr.at
		}
	}
	return f
}
