package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

const (
	itTTL     = 3 * time.Second
	waitLimit = 30 * time.Second // generous: a shared 2-core machine under -race
)

// fire is one run as a fencing-aware receiver would see it.
type fire struct {
	node   string
	tick   time.Time
	token  int64
	rerun  bool
	shard  int
	cause  error // why the run's context ended, if it did
	ended  bool
	blocks bool
}

// ledger records the runs of one node; when block is set each run lasts
// until its context ends (a run in progress when its owner is cut off).
type ledger struct {
	node  string
	block bool
	mu    sync.Mutex
	fires []*fire
}

func (l *ledger) KillGrace() time.Duration { return 5 * time.Second } // the runner's default

func (l *ledger) Run(ctx context.Context, r scheduler.Run) scheduler.Result {
	f := &fire{node: r.Node, tick: r.Tick, token: r.Token, rerun: r.Rerun, shard: r.Shard, blocks: l.block}
	l.mu.Lock()
	l.fires = append(l.fires, f)
	l.mu.Unlock()
	if l.block {
		<-ctx.Done()
	}
	l.mu.Lock()
	f.ended, f.cause = true, context.Cause(ctx)
	l.mu.Unlock()
	if l.block {
		return scheduler.Result{Status: scheduler.StatusCancelled}
	}
	return scheduler.Result{Status: scheduler.StatusSucceeded}
}

func (l *ledger) snapshot() []fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]fire, len(l.fires))
	for i, f := range l.fires {
		out[i] = *f
	}
	return out
}

type node struct {
	id      string
	cli     *clientv3.Client
	proxy   *etcdtest.Proxy
	m       *shard.Manager
	s       *scheduler.Scheduler
	led     *ledger
	stopM   context.CancelFunc
	stopS   context.CancelFunc
	doneM   chan error
	doneS   chan error
	stopped bool
}

func startNode(t *testing.T, srv *etcdtest.Server, ks keyspace.Space, meta shard.Meta, id string, behindProxy, block bool, jobs config.JobSet) *node {
	t.Helper()
	n := &node{id: id, led: &ledger{node: id, block: block}, doneM: make(chan error, 1), doneS: make(chan error, 1)}
	ep := srv.Endpoint()
	if behindProxy {
		n.proxy = etcdtest.NewProxy(t, ep)
		ep = n.proxy.Endpoint()
	}
	n.cli = etcdtest.NewClient(t, ep)
	mcfg := shard.DefaultConfig("it", id)
	mcfg.Lease.TTL = itTTL
	mcfg.SettleDelay = 200 * time.Millisecond
	mcfg.ResyncEvery = time.Second
	mcfg.DrainTimeout = 2 * time.Second
	m, err := shard.New(n.cli, ks, meta, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	scfg := scheduler.DefaultConfig()
	scfg.Cluster, scfg.Node, scfg.Shards = "it", id, meta.Shards
	s, err := scheduler.New(scfg, m.Store(), n.led)
	if err != nil {
		t.Fatal(err)
	}
	n.s = s
	s.SetJobs(jobs)
	sctx, stopS := context.WithCancel(context.Background())
	mctx, stopM := context.WithCancel(context.Background())
	n.stopS, n.stopM = stopS, stopM
	go func() { n.doneS <- s.Run(sctx) }()
	go func() { n.doneM <- m.Run(mctx, s) }()
	t.Cleanup(n.stop)
	return n
}

// stop leaves (the Manager drains through the Scheduler), then stops the
// Scheduler.
func (n *node) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	n.stopM()
	select {
	case <-n.doneM:
	case <-time.After(waitLimit):
	}
	n.stopS()
	<-n.doneS
	n.cli.Close()
}

// Two owners of one shard in succession, the first cut off from etcd (as a
// paused process looks to etcd) in the middle of a run: the first stops
// acting at its safe deadline (its run cancelled with ErrDeadline), its
// late claim fails at the fence, and the second owner re-runs the
// interrupted tick exactly once, with a larger token.
func TestIntegrationPausedOwnerSuccession(t *testing.T) {
	srv := etcdtest.Start(t)
	ks := keyspace.New("it")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta, err := shard.EnsureMeta(ctx, srv.Client(t), ks, shard.DefaultMeta(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	job := config.Job{Name: "sweep", Schedule: "* * * * * *", Concurrency: config.ConcurrencyForbid, Misfire: config.MisfireRunAll}
	jobs := config.JobSet{Version: 1, Jobs: []config.Job{job}}
	js := keyspace.ShardOf(job.Name, meta.Shards)

	a := startNode(t, srv, ks, meta, "a", true, true, jobs)
	poll.Must(t, waitLimit, "a runs the job", poll.True(func() bool { return len(a.led.snapshot()) > 0 }))
	first := a.led.snapshot()[0]

	// Cut a off: it can neither renew nor release.
	a.proxy.Blackhole()
	cut := time.Now()
	poll.Must(t, waitLimit, "a's run cancelled at its safe deadline", poll.True(func() bool { return a.led.snapshot()[0].ended }))
	if f := a.led.snapshot()[0]; !errors.Is(f.cause, scheduler.ErrDeadline) && !errors.Is(f.cause, scheduler.ErrShardLost) {
		t.Errorf("a's run ended with cause %v, want a loss", f.cause)
	}
	if d := time.Since(cut); d > itTTL+2*time.Second {
		t.Errorf("a stopped acting %v after the cut; its lease TTL is %v", d, itTTL)
	}
	if n := len(a.led.snapshot()); n != 1 {
		t.Errorf("a ran %d ticks; with forbid and a blocked run, want 1", n)
	}

	b := startNode(t, srv, ks, meta, "b", false, false, jobs)
	poll.Must(t, waitLimit, "b re-runs the interrupted tick", poll.True(func() bool {
		for _, f := range b.led.snapshot() {
			if f.rerun {
				return true
			}
		}
		return false
	}))
	poll.Must(t, waitLimit, "b runs three more ticks", poll.True(func() bool {
		n := 0
		for _, f := range b.led.snapshot() {
			if !f.rerun && f.ended {
				n++
			}
		}
		return n >= 3
	}))
	var reruns []fire
	seen := map[time.Time]bool{}
	for _, f := range b.led.snapshot() {
		if f.rerun {
			reruns = append(reruns, f)
		}
		if seen[f.tick] {
			t.Errorf("b ran tick %v twice", f.tick)
		}
		seen[f.tick] = true
		if f.token <= first.token {
			t.Errorf("b ran %v with token %d, not above a's %d", f.tick, f.token, first.token)
		}
	}
	// a's interrupted tick, once; besides it only the tick a had claimed
	// ahead of its time (a crash after a tick came due cannot be told from
	// one after its run started, so it is a possible re-run too).
	var interrupted []fire
	for _, f := range reruns {
		switch {
		case f.tick.Equal(first.tick) && f.shard == js:
			interrupted = append(interrupted, f)
		case !f.tick.After(first.tick) || f.tick.After(first.tick.Add(time.Second)):
			t.Errorf("b re-ran %v, neither a's interrupted tick %v nor the one after it", f.tick, first.tick)
		}
	}
	if len(interrupted) != 1 {
		t.Fatalf("b's re-runs %+v, want a's interrupted tick %v exactly once", reruns, first.tick)
	}
	reruns = interrupted

	// a's late claim, as a paused process would send it on waking: refused
	// by its own store (its session is gone) and by etcd's fence.
	rec := scheduler.Record{Job: job.Name, Token: first.token, LastClaimed: time.Now(),
		InFlight: []scheduler.Flight{{Tick: time.Now().Truncate(time.Second), Token: first.token}}}
	val, _ := rec.Encode()
	res := a.m.Store().Commit(context.Background(), []scheduler.Write{{Shard: js, Token: first.token, Job: job.Name, Value: val, Rev: 0}})
	if len(res) != 1 || !errors.Is(res[0].Err, scheduler.ErrShardLost) {
		t.Errorf("a's late claim through its store: %+v, want ErrShardLost", res)
	}
	cli := srv.Client(t)
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer tcancel()
	resp, err := cli.Txn(tctx).If(lease.Guard(ks, lease.Token{Shard: js, Generation: first.token})).
		Then(clientv3.OpPut(ks.Tick(js, job.Name), string(val))).Commit()
	if err != nil || resp.Succeeded {
		t.Errorf("a's late claim at etcd: succeeded=%v err=%v, want refused by the fence", resp != nil && resp.Succeeded, err)
	}

	// The record shows the re-run completed under b's token: the tick is
	// no longer in flight.
	got, err := cli.Get(tctx, ks.Tick(js, job.Name))
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("record: %v %v", got, err)
	}
	r, err := scheduler.DecodeRecord(got.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.InFlight {
		if f.Tick.Equal(first.tick) {
			t.Errorf("the re-run tick %v is still in flight: %+v", first.tick, r)
		}
	}
	if r.Token != reruns[0].token {
		t.Errorf("record written last by token %d, want b's %d", r.Token, reruns[0].token)
	}
	// Its history, kept off the per-fire path, shows b's re-run once b has
	// handed it on (every HistoryFlush).
	poll.Must(t, waitLimit, "b's re-run in the job's history", func() error {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		hist, err := history.Read(rctx, cli, ks, []history.Ref{{Shard: js, Job: job.Name}}, 0)
		if err != nil {
			return err
		}
		for _, e := range hist[0] {
			if e.Tick.Equal(first.tick) && e.Rerun && e.Token == reruns[0].token && e.Node == "b" {
				return nil
			}
		}
		return fmt.Errorf("history %+v", hist[0])
	})
	b.stop()
	a.cli.Close() // a crashed for good: stop it without a graceful leave
	a.stop()
}
