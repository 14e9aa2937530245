// Command floor is the cluster benchmark's floor system (`make
// bench-cluster`, -systems floor): a program that coordinates nothing and
// only sends, at each job's tick, the HTTP request a shardcron run of that
// job would send: a POST carrying the run's identity headers
// (Shardcron-Cluster, -Job, -Tick, -Shard, -Fencing-Token, -Node; the
// idempotency key is cluster, job and tick). What it measures is the
// machine's own limit for timer, request and receiver, which no scheduler
// can beat on the same machine.
//
// It runs as several processes, each firing its share of the jobs (job i
// belongs to part i mod parts). Each keeps its jobs' next ticks in a heap
// and wakes on one timer at the earliest; due ticks go to a pool of sender
// goroutines sharing one transport whose connections are opened before the
// first tick and kept. Schedules are parsed with cronspec.ParseJob, so an H
// field gives each job the offset shardcron gives it.
//
// It prints "ready <unix ns>" once its connections are open, and on SIGTERM
// "sent <n> failed <n>" before it exits. Its fencing token is a constant
// and its shard is its part: nothing is fenced, the sink just records them.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shardcron/shardcron/runner"
)

// options are the floor's flags.
type options struct {
	url, cluster, node, prefix string
	jobs, part, parts, senders int
	spec, tz                   string
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "URL every job POSTs to")
	flag.StringVar(&o.cluster, "cluster", "floor", "value of the Shardcron-Cluster header")
	flag.StringVar(&o.node, "node-id", "floor-1", "value of the Shardcron-Node header")
	flag.StringVar(&o.prefix, "prefix", "job", "job name prefix; jobs are <prefix>-00000...")
	flag.IntVar(&o.jobs, "jobs", 100, "jobs in the whole system (all parts)")
	flag.IntVar(&o.part, "part", 0, "which part of the jobs this process fires (0-based)")
	flag.IntVar(&o.parts, "parts", 1, "how many processes share the jobs")
	flag.IntVar(&o.senders, "senders", 64, "sender goroutines, each with a kept connection (shardcron's default run slots and idle connections)")
	flag.StringVar(&o.spec, "schedule", "* * * * * *", "every job's cron spec (H fields allowed)")
	flag.StringVar(&o.tz, "timezone", "UTC", "the schedule's time zone")
	flag.Parse()
	if o.url == "" || o.parts < 1 || o.part < 0 || o.part >= o.parts || o.senders < 1 {
		log.Fatal("floor: need --url, 0 <= --part < --parts and --senders >= 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatalf("floor: %v", err)
	}
}

// fire is one request to send.
type fire struct {
	job  string
	tick time.Time
}

func run(ctx context.Context, o options) error {
	idx := share(o.jobs, o.part, o.parts)
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = jobName(o.prefix, j)
	}
	p, err := newPlan(names, o.spec, o.tz, time.Now())
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = o.senders
	tr.MaxIdleConns = 0
	s := &sender{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, o: o}
	s.warm(ctx)
	// The queue holds every job's tick at once: a burst never blocks the
	// timer loop behind the senders.
	queue := make(chan fire, max(len(names), 1))
	var wg sync.WaitGroup
	for range o.senders {
		wg.Go(func() {
			for f := range queue {
				s.send(f)
			}
		})
	}
	fmt.Printf("ready %d\n", time.Now().UnixNano())
	loop(ctx, p, queue)
	close(queue)
	wg.Wait()
	fmt.Printf("sent %d failed %d\n", s.sent.Load(), s.failed.Load())
	return nil
}

// loop waits on one timer for the earliest tick, then hands every due tick
// to the senders, until ctx ends or no tick is left.
func loop(ctx context.Context, p *plan, queue chan<- fire) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		at, ok := p.first()
		if !ok {
			<-ctx.Done()
			return
		}
		t.Reset(time.Until(at))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.popDue(time.Now(), func(job string, tick time.Time) { queue <- fire{job, tick} })
	}
}

// sender sends fires over one shared transport.
type sender struct {
	client       *http.Client
	o            options
	sent, failed atomic.Int64
}

// warm opens o.senders connections at once and returns them to the idle
// pool, so the first tick does not pay for connecting. The request has no
// identity: the sink answers 400 and records nothing.
func (s *sender) warm(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.o.senders {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.url, nil)
			if err != nil {
				return
			}
			if resp, err := s.client.Do(req); err == nil {
				drain(resp)
			}
		})
	}
	wg.Wait()
}

// send POSTs f with a run's identity headers, as shardcron's HTTP runner
// builds them for a job with no headers of its own.
func (s *sender) send(f fire) {
	req, err := http.NewRequest(http.MethodPost, s.o.url, nil)
	if err != nil {
		s.failed.Add(1)
		return
	}
	h := req.Header
	h.Set("User-Agent", "shardcron")
	h.Set(runner.HeaderCluster, s.o.cluster)
	h.Set(runner.HeaderJob, f.job)
	h.Set(runner.HeaderTick, runner.FormatTick(f.tick))
	h.Set(runner.HeaderShard, strconv.Itoa(s.o.part))
	h.Set(runner.HeaderFencingToken, "1")
	h.Set(runner.HeaderNode, s.o.node)
	resp, err := s.client.Do(req)
	if err != nil {
		s.failed.Add(1)
		return
	}
	drain(resp)
	if resp.StatusCode >= 300 {
		s.failed.Add(1)
		return
	}
	s.sent.Add(1)
}

// drain reads the body (up to the runner's bound) and closes it, so the
// connection goes back to the pool.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}
