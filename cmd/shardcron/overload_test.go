package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

const (
	overloadJobs   = 10000
	overloadShards = 32
	overloadTTL    = 6 * time.Second
	overloadMargin = time.Second
	overloadSlots  = 32
	// overloadWindow covers at least two job storms (every 10 s) and twelve
	// renewals (every TTL/3).
	overloadWindow = 25 * time.Second
)

// silentSink accepts connections and never answers: every http run holds
// its slot until its timeout.
func silentSink(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/never"
}

// gatedProc is a replica whose output the test stops reading: a log
// consumer that falls behind, so its stderr pipe fills up and blocks.
type gatedProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	open   bool
	cond   *sync.Cond
	tail   []string
	done   chan struct{}
	reader chan struct{}
}

func startGated(t *testing.T, args ...string) *gatedProc {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProc{cmd: exec.Command(binPath, args...), open: true, done: make(chan struct{}), reader: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		defer close(p.reader)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for {
			p.mu.Lock()
			for !p.open {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if !sc.Scan() {
				return
			}
			p.mu.Lock()
			p.tail = append(p.tail, sc.Text())
			if len(p.tail) > 300 {
				p.tail = p.tail[len(p.tail)-200:]
			}
			p.mu.Unlock()
		}
	}()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		p.gate(true)
		pr.Close()
		<-p.reader
		if t.Failed() {
			p.mu.Lock()
			t.Logf("---- replica output (last lines) ----\n%s", strings.Join(p.tail, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// gate opens or closes the reading of the replica's output.
func (p *gatedProc) gate(open bool) {
	p.mu.Lock()
	p.open = open
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *gatedProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// TestOverloadKeepsTheLease saturates a replica — every run slot held by
// a sink that never answers, a storm of 10,000 ticks in one second every
// ten seconds, and a log consumer that stops reading — and shows that its
// lease renewals keep their cadence and no shard changes hands: renewal
// never waits behind job work, logging, or a full channel.
func TestOverloadKeepsTheLease(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	url := silentSink(t)
	var b strings.Builder
	b.WriteString("jobs:\n")
	// The storm: every job's tick in the same second, every run held by
	// the sink for its minute; the ticks that find no slot pass their 1 s
	// starting deadline, and each skip is logged.
	for i := range overloadJobs {
		fmt.Fprintf(&b, "  - name: storm-%05d\n    schedule: \"*/10 * * * * *\"\n    http: {url: %q}\n    timeout: 1m\n    starting_deadline: 1s\n", i, url)
	}
	jobs := writeFile(t, "jobs.yaml", b.String())
	addr, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startGated(t, "server", "--cluster", "overload", "--node-id", "solo",
		"--etcd-endpoints", etcd.Endpoint(), "--http-addr", addr, "--jobs", jobs,
		"--lease-ttl", overloadTTL.String(), "--lease-margin", overloadMargin.String(),
		"--shards", fmt.Sprint(overloadShards), "--max-concurrent-runs", fmt.Sprint(overloadSlots))
	var last scrape
	ready := func(what string, cond func(scrape) bool) {
		t.Helper()
		if _, err := poll.UntilEvery(100*time.Millisecond, 3*time.Minute, poll.True(func() bool {
			if p.exited() {
				t.Fatal("the replica exited")
			}
			if s := tryScrape(addr); s != nil {
				last = s
			}
			return cond(last)
		})); err != nil {
			t.Fatalf("%s: not within 3m; last: owned %v, slots used %v, runs in flight %v, jobs %v", what,
				last.get("shardcron_ownership_shards_owned"), last.get("shardcron_scheduler_run_slots_used"),
				last.get("shardcron_scheduler_runs_in_flight"), last.get("shardcron_jobs_count"))
		}
	}
	ready("every shard owned", func(s scrape) bool { return s.get("shardcron_ownership_shards_owned") == overloadShards })
	ready("a storm decided", func(s scrape) bool {
		skipped, _ := s.sum("shardcron_scheduler_ticks_skipped_total")
		return s.get("shardcron_scheduler_runs_in_flight") > 0 || skipped > 0
	})

	// The log consumer stops reading; the storms go on.
	p.gate(false)
	before := scrapeMetrics(t, addr)
	minRemaining := overloadTTL
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < overloadWindow {
		<-tick.C
		if p.exited() {
			t.Fatal("the replica exited under overload")
		}
		s := tryScrape(addr)
		if len(s) == 0 {
			continue // a scrape that failed says nothing of the lease
		}
		r := time.Duration(s.get("shardcron_lease_remaining_seconds") * float64(time.Second))
		minRemaining = min(minRemaining, r)
	}
	after := scrapeMetrics(t, addr)
	p.gate(true)

	delta := func(name string, labels ...string) float64 {
		return after.get(name, labels...) - before.get(name, labels...)
	}
	renewals := delta("shardcron_lease_renewal_duration_seconds_count")
	t.Logf("overload window %v: %v renewals, min time to the safe deadline %v, %v runs in flight, %v ticks skipped, %v log lines dropped, fire lag sum %.0fs over %v runs started",
		overloadWindow, renewals, minRemaining.Round(time.Millisecond), after.get("shardcron_scheduler_runs_in_flight"),
		delta("shardcron_scheduler_ticks_skipped_total"), after.get("shardcron_log_lines_dropped_total"),
		delta("shardcron_scheduler_fire_lag_seconds_sum"), delta("shardcron_scheduler_fire_lag_seconds_count"))

	// Renewals kept their cadence: one per TTL/3, none failed.
	if want := float64(overloadWindow/(overloadTTL/3)) - 1; renewals < want {
		t.Errorf("%v renewals in %v, want at least %v (one per TTL/3)", renewals, overloadWindow, want)
	}
	if f := delta("shardcron_lease_renewal_failures_total"); f != 0 {
		t.Errorf("%v renewals failed under overload", f)
	}
	// Each renewal landed within its attempt (TTL/6) after TTL/3: the time
	// left never fell below TTL - margin - TTL/3 - TTL/6.
	if bound := overloadTTL - overloadMargin - overloadTTL/3 - overloadTTL/6; minRemaining < bound {
		t.Errorf("time to the safe deadline fell to %v, below the %v of on-time renewals", minRemaining, bound)
	}
	// No shard changed hands.
	for _, m := range []string{"shardcron_ownership_acquisitions_total", "shardcron_ownership_losses_total", "shardcron_ownership_releases_total"} {
		if d := delta(m); d != 0 {
			t.Errorf("%s moved by %v under overload", m, d)
		}
	}
	if after.get("shardcron_ownership_shards_owned") != overloadShards {
		t.Errorf("owns %v shards after the overload, want %d", after.get("shardcron_ownership_shards_owned"), overloadShards)
	}
	// It was overloaded: every slot held by a run the sink never answers,
	// or (when the storm's claims land after its 1 s starting deadline, as
	// on a loaded machine) the storms skipped whole; and the log output
	// blocked.
	skipped := delta("shardcron_scheduler_ticks_skipped_total")
	if after.get("shardcron_scheduler_runs_in_flight") != overloadSlots && skipped < 2*overloadJobs {
		t.Errorf("not saturated: %v runs of %d slots in flight, %v ticks skipped", after.get("shardcron_scheduler_runs_in_flight"), overloadSlots, skipped)
	}
	if after.get("shardcron_log_lines_dropped_total") == 0 {
		t.Error("no log line dropped: the log output never blocked, so the test did not load the logging path")
	}
}

// tryScrape reads /metrics, or nothing when the replica does not serve it
// (yet), or the request fails.
func tryScrape(addr string) scrape {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	s := scrape{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			s[line[:i]] = v
		}
	}
	return s
}
