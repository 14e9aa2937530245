// Command soak is the sustained-rate benchmark (`make bench-soak`): one
// `shardcron server --embedded-etcd` (the embedded default: its own etcd,
// compaction, quota and defragmentation as shipped) fires -jobs jobs every
// second into an in-process HTTP sink for -duration, and the etcd database
// it grows is watched the whole time. Every -scrape it prints the
// database's size, the part in use, the quota, the NOSPACE gauge, the
// replica's heap, and the fires received, duplicated and their lag; at the
// end, every (job, second) of the measured stretch that never arrived is a
// missed tick. Targets (issue 23): no NOSPACE, the database size flat after
// the first compaction, 0 missed.
//
// Only loopback is used; ports come from the kernel. The replica runs in
// its own process group with Pdeathsig SIGKILL and is stopped on every exit
// path, Ctrl-C included.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

type config struct {
	bin               string
	jobs              int
	duration, scrape  time.Duration
	warmup, drain     time.Duration
	maxRuns           int
	dir, jsonOut, log string
}

func main() {
	var c config
	flag.StringVar(&c.bin, "shardcron", "bin/shardcron", "shardcron binary")
	flag.IntVar(&c.jobs, "jobs", 5000, "jobs firing every second (the rate in fires per second)")
	flag.DurationVar(&c.duration, "duration", 30*time.Minute, "how long the replica fires, from the first fire")
	flag.DurationVar(&c.scrape, "scrape", 15*time.Second, "how often /metrics is read and a line printed")
	flag.DurationVar(&c.warmup, "warmup", 30*time.Second, "the start of the run not counted for missed ticks (the replica takes its shards and loads the set)")
	flag.DurationVar(&c.drain, "drain", 10*time.Second, "the end of the run not counted for missed ticks (fires still on their way)")
	flag.IntVar(&c.maxRuns, "max-concurrent-runs", 64, "the replica's --max-concurrent-runs")
	flag.StringVar(&c.dir, "dir", "", "where the jobs file, the etcd data and the replica's log go (default: a temporary directory, removed after)")
	flag.StringVar(&c.jsonOut, "json", "bench/soak-results.json", "where to write the JSON summary")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(c.jsonOut, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	report(os.Stdout, res)
}

func run(ctx context.Context, c config) (result, error) {
	if c.dir == "" {
		d, err := os.MkdirTemp("", "shardcron-soak-")
		if err != nil {
			return result{}, err
		}
		defer os.RemoveAll(d)
		c.dir = d
	}
	snk := newSink(c.jobs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: snk, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	jobsFile := filepath.Join(c.dir, "soak.yaml")
	if err := writeJobs(jobsFile, c.jobs, "http://"+ln.Addr().String()); err != nil {
		return result{}, err
	}
	rep, addr, err := startReplica(ctx, &c, jobsFile)
	if err != nil {
		return result{}, err
	}
	defer rep.stop()
	first, err := snk.waitFirst(ctx, 3*time.Minute)
	if err != nil {
		return result{}, fmt.Errorf("no fire arrived: %w (replica log: %s)", err, c.log)
	}
	res := result{Jobs: c.jobs, Duration: c.duration.String(), Start: first}
	end := first.Add(c.duration)
	t := time.NewTicker(c.scrape)
	defer t.Stop()
	fmt.Printf("soak: %d jobs every second from %s for %v; a line every %v\n", c.jobs, first.UTC().Format(time.TimeOnly), c.duration, c.scrape)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-t.C:
		}
		if rep.exited() {
			return res, fmt.Errorf("the replica exited (log: %s)", c.log)
		}
		s := sample(ctx, "http://"+addr+"/metrics", snk, first)
		res.Samples = append(res.Samples, s)
		fmt.Println(s)
	}
	from, to := first.Add(c.warmup).Truncate(time.Second), end.Add(-c.drain).Truncate(time.Second)
	res.Missed, res.Expected = snk.missed(from, to)
	res.Received, res.Duplicates = snk.totals()
	res.summarize(snk)
	return res, nil
}

// replica is the shardcron process.
type replica struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startReplica starts one embedded-etcd replica with the soak's jobs on a
// port the kernel picks, and waits until its /readyz answers 200.
func startReplica(ctx context.Context, c *config, jobsFile string) (*replica, string, error) {
	c.log = filepath.Join(c.dir, "replica.log")
	logf, err := os.Create(c.log)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(c.bin, "server", "--embedded-etcd", "--data-dir", filepath.Join(c.dir, "data"),
		"--jobs", jobsFile, "--http-addr", "127.0.0.1:0", "--node-id", "soak", "--cluster", "soak",
		"--max-concurrent-runs", fmt.Sprint(c.maxRuns))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	r := &replica{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(r.done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if addr, ok := listening(c.log); ok {
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return r, addr, nil
				}
			}
		}
		if r.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, "", errors.Join(errors.New("the replica did not become ready; its log: "+c.log), ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addrRE finds the addr attribute of the replica's "http listening" line
// (text or JSON log).
var addrRE = regexp.MustCompile(`"?addr"?[=:]"?([0-9.:\[\]a-f]+)`)

// listening returns the address the replica logged as "http listening".
func listening(log string) (string, bool) {
	b, err := os.ReadFile(log)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "http listening") {
			if m := addrRE.FindStringSubmatch(line); m != nil {
				return m[1], true
			}
		}
	}
	return "", false
}

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the replica's group, and SIGKILL after 15 s.
func (r *replica) stop() {
	if r.exited() {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// writeJobs writes n jobs firing every second, each posting to the sink.
func writeJobs(path string, n int, sink string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, "jobs:")
	for i := range n {
		fmt.Fprintf(f, "  - name: soak-%05d\n    schedule: \"* * * * * *\"\n    http: {url: %q, method: POST}\n    timeout: 5s\n",
			i, fmt.Sprintf("%s/%d", sink, i))
	}
	return f.Close()
}
