package replica

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/shard"
)

// fires records, by job, the nodes that ran it and when.
type fires struct {
	mu  sync.Mutex
	ran map[string][]fire
}

type fire struct {
	node string
	at   time.Time
}

func (f *fires) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	job := r.Header.Get("Shardcron-Job")
	f.ran[job] = append(f.ran[job], fire{r.Header.Get("Shardcron-Node"), time.Now()})
}

// ranOnAfter reports whether job ran on node after t.
func (f *fires) ranOnAfter(job, node string, t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.ran[job] {
		if x.node == node && x.at.After(t) {
			return true
		}
	}
	return false
}

// holdsOwnShards reports whether r's scheduler was handed exactly the jobs
// of the shards node owns (as etcd says), and the index lists every job.
func holdsOwnShards(t *testing.T, r *Replica, jobs []config.Job, shards int) bool {
	st, err := shard.ReadState(context.Background(), r.cli, r.ks)
	if err != nil || r.cat == nil {
		return false
	}
	h := r.cat.held.Load()
	if h == nil || h.Index.Len() != len(jobs) {
		return false
	}
	want := 0
	for _, j := range jobs {
		if st.ShardSet[keyspace.ShardOf(j.Name, shards)].Owner == r.cfg.Node {
			want++
		}
	}
	for _, j := range h.Jobs {
		if st.ShardSet[keyspace.ShardOf(j.Name, shards)].Owner != r.cfg.Node {
			return false
		}
	}
	return len(h.Jobs) == want
}

// logged keeps every log message, for checking what was said.
type logged struct {
	mu   sync.Mutex
	msgs []string
	// blind counts the acquisitions that found records of the shard and
	// no job: the scheduler took the shard before it held its jobs.
	blind, acquired int
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	if r.Message == "shard acquired" {
		var jobs, records int64
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "jobs":
				jobs = a.Value.Int64()
			case "records":
				records = a.Value.Int64()
			}
			return true
		})
		l.acquired++
		if jobs == 0 && records > 0 {
			l.blind++
		}
	}
	return nil
}

func (l *logged) said(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.msgs, func(m string) bool { return strings.HasPrefix(m, prefix) })
}

// Two replicas each hold only their own shards' jobs; when one leaves, the
// other fetches the incoming shards' jobs as it takes them, inside the
// handoff budget (no acquisition went ahead without them), fires them, and
// then holds every job.
func TestReplicasHoldOwnShardsAndFetchOnHandoff(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	rec := &fires{ran: map[string][]fire{}}
	target := httptest.NewServer(rec)
	defer target.Close()
	const shards = 8
	file := "jobs:\n"
	for i := range 40 {
		file += fmt.Sprintf("  - {name: tick-%02d, schedule: \"* * * * * *\", timezone: UTC, http: {url: %q}}\n", i, target.URL)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ks := keyspace.New("held")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{Shards: shards}); err != nil {
		t.Fatal(err)
	}
	logs := &logged{}
	start := func(node string) (*Replica, context.CancelFunc, chan error) {
		r, err := New(cli, Config{Cluster: "held", Node: node, Listener: listener(t), Shards: shards, Lease: lease.Config{TTL: 3 * time.Second}, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return r, cancel, done
	}
	a, _, _ := start("a")
	b, stopB, doneB := start("b")
	poll.Must(t, waitLimit, "each replica holds only its own shards' jobs, both own some", poll.True(func() bool {
		st, err := shard.ReadState(ctx, cli, ks)
		return err == nil && st.Unowned == 0 && len(st.Members) == 2 &&
			holdsOwnShards(t, a, jobs, shards) && holdsOwnShards(t, b, jobs, shards) &&
			len(a.cat.held.Load().Jobs) > 0 && len(b.cat.held.Load().Jobs) > 0
	}))
	st, err := shard.ReadState(ctx, cli, ks)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string // b's jobs, a's after b leaves
	for _, j := range jobs {
		if st.ShardSet[keyspace.ShardOf(j.Name, shards)].Owner == "b" {
			moved = append(moved, j.Name)
		}
	}
	left := time.Now()
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b left with %v", err)
	}
	doneB <- nil // for the cleanup
	poll.Must(t, waitLimit, "a holds every job and has fired each of b's", poll.True(func() bool {
		for _, name := range moved {
			if !rec.ranOnAfter(name, "a", left) {
				return false
			}
		}
		return holdsOwnShards(t, a, jobs, shards) && len(a.cat.held.Load().Jobs) == len(jobs)
	}))
	if logs.said("shard's jobs not read within the handoff budget") {
		t.Error("an acquisition went ahead without its shard's jobs")
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.blind > 0 || logs.acquired <= shards {
		t.Errorf("%d of %d acquisitions found their shard's records and none of its jobs, want none of more than %d", logs.blind, logs.acquired, shards)
	}
}
