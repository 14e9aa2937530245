// Command leader is the single-leader peer of the cluster benchmark: gocron
// v2 scheduling every job on every instance, with an etcd elector
// (concurrency.Election) so that only the elected instance runs them. It is
// what users would deploy instead of shardcron, and it sends the same
// Shardcron-* identity headers to the benchmark's sink so both are measured
// by one ledger.
//
// It lives in its own module so that gocron never joins shardcron's go.mod.
// It is unfenced: its fencing token is the election key's revision, sent
// for the ledger's sake, but nothing stops a deposed leader from acting.
//
// On SIGTERM it resigns (the next candidate is elected at once) and exits.
// It prints "elected <unix ns>" and "resigned <unix ns>" lines on stdout for
// the benchmark's handoff figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	var (
		endpoints = flag.String("etcd-endpoints", "http://127.0.0.1:2379", "etcd endpoints, comma separated")
		node      = flag.String("node-id", "leader-1", "this instance's id")
		election  = flag.String("election", "/bench/leader", "etcd prefix of the election")
		ttl       = flag.Int("ttl", 10, "election session TTL, seconds")
		jobs      = flag.Int("jobs", 100, "number of jobs, each firing every second")
		prefix    = flag.String("prefix", "job", "job name prefix; jobs are <prefix>-00000...")
		url       = flag.String("url", "", "URL every job POSTs to")
		cluster   = flag.String("cluster", "leader", "value of the Shardcron-Cluster header")
	)
	flag.Parse()
	if *url == "" {
		log.Fatal("leader: --url is required")
	}
	if err := run(*endpoints, *node, *election, *ttl, *jobs, *prefix, *url, *cluster); err != nil {
		log.Fatalf("leader: %v", err)
	}
}

func run(endpoints, node, election string, ttl, jobs int, prefix, url, cluster string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	el := newElector(cli, election, node, ttl)
	elected := make(chan struct{}) // closed by el.run when it returns
	go func() { defer close(elected); el.run(ctx) }()

	mon := newTickMonitor()
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el), gocron.WithSchedulerMonitor(mon))
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // as many kept connections as shardcron's default run slots
	f := &firer{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: url, cluster: cluster, node: node, el: el, mon: mon}
	for i := range jobs {
		name := fmt.Sprintf("%s-%05d", prefix, i)
		if _, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(f.fire, name), gocron.WithName(name)); err != nil {
			return err
		}
	}
	s.Start()
	<-ctx.Done()
	<-elected // resigned: the next candidate leads while this one shuts down
	return s.Shutdown()
}

// firer is every job's task: one POST to the sink carrying the run's
// identity.
type firer struct {
	client             *http.Client
	url, cluster, node string
	el                 *elector
	mon                *tickMonitor
}

func (f *firer) fire(name string) {
	term := f.el.token()
	tick := f.mon.tick(name, term, time.Now())
	req, err := http.NewRequest(http.MethodPost, f.url, nil)
	if err != nil {
		return
	}
	h := req.Header
	h.Set("Shardcron-Cluster", f.cluster)
	h.Set("Shardcron-Job", name)
	h.Set("Shardcron-Tick", tick.UTC().Format(time.RFC3339))
	h.Set("Shardcron-Shard", "0")
	h.Set("Shardcron-Fencing-Token", fmt.Sprint(term))
	h.Set("Shardcron-Node", f.node)
	resp, err := f.client.Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
}

// tickMonitor learns each run's scheduled time: gocron passes it only to a
// SchedulerMonitor (JobSchedulingDelay, the first of the job's pending
// scheduled times), synchronously, in the goroutine that then calls the
// task. Two corrections make it the run's own tick:
//   - gocron prunes a job's past scheduled times only when a run completes,
//     and a follower's runs are skipped, so the first run after an election
//     reports the follower's oldest time: that run's tick is the current
//     second (a new leader starts on time);
//   - while the previous run of the job has not completed, the first
//     pending time is that run's: a tick already sent is followed by the
//     next one.
type tickMonitor struct {
	gocron.SchedulerMonitor
	mu    sync.Mutex
	sched map[string]time.Time
	last  map[string]sent
}

// sent is the last tick a job sent, in the term (election revision) it
// was sent in.
type sent struct {
	term int64
	tick time.Time
}

func newTickMonitor() *tickMonitor {
	return &tickMonitor{sched: map[string]time.Time{}, last: map[string]sent{}}
}

func (m *tickMonitor) JobSchedulingDelay(j gocron.Job, scheduled, _ time.Time) {
	m.mu.Lock()
	m.sched[j.Name()] = scheduled
	m.mu.Unlock()
}

// tick returns the tick of the run of job name starting now, in term.
func (m *tickMonitor) tick(name string, term int64, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.sched[name]
	prev, had := m.last[name]
	switch {
	case !ok:
		t = now.Truncate(time.Second)
	case had && prev.term == term && !t.After(prev.tick):
		t = prev.tick.Add(time.Second)
	case (!had || prev.term != term) && now.Sub(t) >= time.Second:
		t = now.Truncate(time.Second)
	}
	m.last[name] = sent{term, t}
	return t
}

func (*tickMonitor) SchedulerStarted()                          {}
func (*tickMonitor) SchedulerStopped()                          {}
func (*tickMonitor) SchedulerShutdown()                         {}
func (*tickMonitor) JobRegistered(gocron.Job)                   {}
func (*tickMonitor) JobUnregistered(gocron.Job)                 {}
func (*tickMonitor) JobStarted(gocron.Job)                      {}
func (*tickMonitor) JobRunning(gocron.Job)                      {}
func (*tickMonitor) JobFailed(gocron.Job, error)                {}
func (*tickMonitor) JobCompleted(gocron.Job)                    {}
func (*tickMonitor) JobExecutionTime(gocron.Job, time.Duration) {}
func (*tickMonitor) ConcurrencyLimitReached(string, gocron.Job) {}
