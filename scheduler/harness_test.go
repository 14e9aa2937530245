package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// A harness runs one Scheduler on the fakes, under the calling synctest
// bubble's fake clock.
type harness struct {
	t        *testing.T
	s        *Scheduler
	store    *fakeStore
	runner   *fakeRunner
	deadline *fakeDeadline
	contact  *fakeContact
	reg      *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
	cancels  []context.CancelCauseFunc
}

const testShards = 8

// newHarness starts a scheduler with the given jobs (version 1) on the
// fake clock of the calling synctest bubble.
func newHarness(t *testing.T, mod func(*Config), jobs ...config.Job) *harness {
	return newHarnessWith(t, newFakeStore(t), nil, mod, jobs...)
}

func newHarnessWith(t *testing.T, fs *fakeStore, store Store, mod func(*Config), jobs ...config.Job) *harness {
	h := &harness{t: t, store: fs, runner: &fakeRunner{grace: 5 * time.Second}, deadline: newDeadline(1000 * time.Hour), contact: &fakeContact{},
		reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	if store == nil {
		store = fs
	}
	cfg := DefaultConfig()
	cfg.Cluster, cfg.Node, cfg.Shards = "c1", "n1", testShards
	cfg.Registerer = h.reg
	cfg.HistoryFlush = 50 * time.Millisecond
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, store, h.runner)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	if len(jobs) > 0 {
		s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- s.Run(ctx) }()
	return h
}

// stop ends Run and checks that it joined everything.
func (h *harness) stop() {
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run: %v", err)
	}
	for _, c := range h.cancels {
		c(errors.New("test over"))
	}
}

// grant makes this node the owner of shard with token: the fence moves,
// and the Grant carries the checkpoint as the store holds it.
func (h *harness) grant(shard int, token int64, rel *Released) (Grant, context.CancelCauseFunc) {
	lost, cancel := context.WithCancelCause(context.Background())
	h.store.mu.Lock()
	h.store.fence[shard] = token
	h.store.lost[shard] = cancel
	h.store.mu.Unlock()
	cp := h.store.checkpoint(shard)
	cp.Released = rel
	h.cancels = append(h.cancels, cancel)
	return Grant{Shard: shard, Token: token, Lost: lost, Deadline: h.deadline, Contact: h.contact, Checkpoint: cp}, cancel
}

// job returns a job named name in shard (searching names name, name-1, ...).
func jobIn(shard int, name, spec string) config.Job {
	for i := 0; ; i++ {
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s-%d", name, i)
		}
		if keyspace.ShardOf(n, testShards) == shard {
			return config.Job{Name: n, Schedule: spec, Concurrency: config.ConcurrencyAllow, Misfire: config.MisfireRunAll}
		}
	}
}

// sleepUntil advances the bubble's fake clock to t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

func ticksOf(runs []runRec) []time.Time {
	out := make([]time.Time, len(runs))
	for i, r := range runs {
		out[i] = r.Tick
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}
