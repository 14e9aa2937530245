// Command cluster is the cluster benchmark (`make bench-cluster`): a real
// etcd process, N `shardcron server` processes and, side by side, the
// single-leader peer (gocron v2 with an etcd elector, bench/leader) and the
// floor system (bench/floor: the same requests at each tick and nothing
// else), all on loopback, firing jobs every second into an in-process
// fencing-aware sink; and a burst of many jobs due at one instant, with and
// without H. It prints a table and a JSON summary, writes an SVG plot, and
// reports PASS/FAIL against issues 11's and 23's targets (benchmark
// figures: it exits 0 whatever they say, non-zero only when it could not
// measure).
//
// Every process runs in its own process group with Pdeathsig SIGKILL and is
// killed on every exit path, Ctrl-C included. Only loopback is used; ports
// come from the kernel.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/gcpace"
)

// config is the benchmark's flags.
type config struct {
	shardcronBin, etcdBin, leaderBin string
	floorBin                         string
	floorSenders                     int
	burstJobs                        int
	burstModes                       []string
	burstLead, burstDrain            time.Duration
	scenarios                        map[string]bool
	systems                          []string
	rates                            []int
	rounds                           int
	replicas, shards, maxRuns        int
	ttl, faultTTL                    time.Duration
	warmup, window, drain            time.Duration
	startTimeout                     time.Duration
	scaleReplicas                    []int
	scaleShards                      []int
	scaleJobs, scaleSlots            int
	scaleWindow                      time.Duration
	faultJobs                        int
	shapeRounds, shapeTxns           int
	logLevel                         string
	jsonOut, svgOut                  string
	keepLogs                         bool
	phases                           time.Duration
	sinkHeadroomMiB                  int
	replot                           string
}

func parseFlags() (config, error) {
	var c config
	var scenarios, systems, rates, scaleN, scaleS, burstModes string
	flag.StringVar(&c.shardcronBin, "shardcron", "bin/shardcron", "shardcron binary")
	flag.StringVar(&c.etcdBin, "etcd", "bin/etcd", "etcd binary")
	flag.StringVar(&c.leaderBin, "leader", "bin/shardcron-leader", "single-leader peer binary (bench/leader)")
	flag.StringVar(&c.floorBin, "floor", "bin/shardcron-floor", "floor system binary (bench/floor)")
	flag.StringVar(&scenarios, "scenarios", "rate,scaleout,faults,burst", "scenarios to run: rate, scaleout, faults, burst; txnshape (etcd's CPU a completion for three transaction shapes) only when named")
	flag.StringVar(&systems, "systems", "shardcron,leader,floor", "systems in the rate scenario; the faults take shardcron and leader of them, the burst shardcron and floor")
	flag.StringVar(&rates, "rates", "200,1000,5000,10000", "fires per second (jobs every second) of the rate scenario")
	flag.IntVar(&c.rounds, "rounds", 1, "rounds of the rate scenario: each rate's systems run one after another this many times, and a target takes the median of the rounds' ratios")
	flag.IntVar(&c.floorSenders, "floor-senders", 64, "sender goroutines (kept connections) per floor process")
	flag.IntVar(&c.burstJobs, "burst-jobs", 100000, "jobs due at one instant in the burst scenario")
	flag.StringVar(&burstModes, "burst-modes", "plain,H", "burst schedules: plain (second 0 of one minute) and H (the job's hashed second of that minute)")
	flag.DurationVar(&c.burstLead, "burst-lead", 30*time.Second, "least time from shardcron's ready replicas to the burst's minute: the apply and every replica's load must fit in it")
	flag.DurationVar(&c.burstDrain, "burst-drain", 3*time.Minute, "bound on waiting for the burst's last tick to arrive, after it is due; also its jobs' starting_deadline")
	flag.IntVar(&c.replicas, "replicas", 3, "replicas (and leader candidates) in the rate and fault scenarios")
	flag.IntVar(&c.shards, "shards", 1024, "shards of the rate scenario's clusters")
	flag.IntVar(&c.maxRuns, "max-concurrent-runs", 64, "--max-concurrent-runs of the rate and fault scenarios' replicas")
	flag.DurationVar(&c.ttl, "lease-ttl", 10*time.Second, "lease TTL (election TTL) of the rate scenario")
	flag.DurationVar(&c.faultTTL, "fault-ttl", 3*time.Second, "lease TTL (election TTL) of the fault scenario")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Second, "time from ready to the measured window")
	flag.DurationVar(&c.window, "window", 20*time.Second, "measured window of the rate scenario")
	flag.DurationVar(&c.phases, "phases", 0, "sample every process's CPU from /proc every 4 ms for this long in each rate window and print it by 50 ms step of the second (0: off; the sampling costs about 2% of a core)")
	flag.DurationVar(&c.startTimeout, "start-timeout", 90*time.Second, "bound on a cluster's start: processes ready, then every job fired once")
	flag.DurationVar(&c.drain, "drain", 15*time.Second, "bound on waiting for a window's late ticks")
	flag.StringVar(&scaleN, "scale-replicas", "1,2,4", "replica counts of the scale-out scenario")
	flag.StringVar(&scaleS, "scale-shards", "1,256", "shard counts of the scale-out scenario")
	flag.IntVar(&c.scaleJobs, "scale-jobs", 600, "jobs (every second) offered in the scale-out scenario; more than the slots can run")
	flag.IntVar(&c.scaleSlots, "scale-slots", 8, "--max-concurrent-runs per replica in the scale-out scenario (each run holds a slot 100 ms)")
	flag.DurationVar(&c.scaleWindow, "scale-window", 10*time.Second, "measured window of each scale-out cell")
	flag.IntVar(&c.faultJobs, "fault-jobs", 200, "jobs (every second) in the fault scenario")
	flag.IntVar(&c.shapeRounds, "txnshape-rounds", 2, "rounds of the three shapes in the txnshape scenario")
	flag.IntVar(&c.shapeTxns, "txnshape-txns", 400, "transactions per sender and shape in the txnshape scenario")
	flag.StringVar(&c.logLevel, "log-level", "info", "shardcron --log-level (info is its default)")
	flag.StringVar(&c.jsonOut, "json", "bench/cluster-results.json", "where to write the JSON summary (also printed)")
	flag.StringVar(&c.svgOut, "svg", "bench/cluster.svg", "where to write the plot")
	flag.BoolVar(&c.keepLogs, "keep-logs", false, "keep the processes' logs and etcd data even on success")
	flag.StringVar(&c.replot, "replot", "", "only redraw the plot (-svg) from this JSON summary of an earlier run")
	flag.IntVar(&c.sinkHeadroomMiB, "sink-gc-headroom", 1024, "MiB the benchmark's own heap (the sink's ledger) may grow between collections; 0: Go's default pacing")
	quick := flag.Bool("quick", false, "a short run for iterating: rates 200,1000, short windows, scale-out at 1 and 4 replicas, a burst of 10,000")
	flag.Parse()
	if *quick {
		quickDefaults(map[string]any{"rates": &rates, "scale-replicas": &scaleN, "warmup": &c.warmup,
			"window": &c.window, "scale-window": &c.scaleWindow, "drain": &c.drain,
			"burst-jobs": &c.burstJobs, "burst-lead": &c.burstLead})
	}
	c.scenarios = map[string]bool{}
	for _, s := range strings.Split(scenarios, ",") {
		c.scenarios[strings.TrimSpace(s)] = true
	}
	c.systems = strings.Split(systems, ",")
	for _, m := range strings.Split(burstModes, ",") {
		if m = strings.TrimSpace(m); m != burstPlain && m != burstHashed {
			return c, fmt.Errorf("-burst-modes: %q is neither %s nor %s", m, burstPlain, burstHashed)
		}
		c.burstModes = append(c.burstModes, m)
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds %d: must be 1 or more", c.rounds)
	}
	var err error
	if c.rates, err = ints(rates); err != nil {
		return c, err
	}
	if c.scaleReplicas, err = ints(scaleN); err != nil {
		return c, err
	}
	if c.scaleShards, err = ints(scaleS); err != nil {
		return c, err
	}
	return c, nil
}

// quickDefaults sets the -quick values of the flags in vars that were not
// given on the command line.
func quickDefaults(vars map[string]any) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	quick := map[string]any{"rates": "200,1000", "scale-replicas": "1,4", "warmup": 2 * time.Second,
		"window": 5 * time.Second, "scale-window": 4 * time.Second, "drain": 8 * time.Second,
		"burst-jobs": 10000, "burst-lead": 20 * time.Second}
	for name, v := range vars {
		if set[name] {
			continue
		}
		switch p := v.(type) {
		case *string:
			*p = quick[name].(string)
		case *time.Duration:
			*p = quick[name].(time.Duration)
		case *int:
			*p = quick[name].(int)
		}
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q in %q", f, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// uses reports whether system takes part in any chosen scenario.
func (c config) uses(system string) bool {
	in := slices.Contains(c.systems, system)
	switch system {
	case systemShardcron:
		return (in && (c.scenarios["rate"] || c.scenarios["faults"] || c.scenarios["burst"])) || c.scenarios["scaleout"]
	case systemLeader:
		return in && (c.scenarios["rate"] || c.scenarios["faults"])
	default:
		return in && (c.scenarios["rate"] || c.scenarios["burst"])
	}
}

// binaries returns the binaries the chosen scenarios and systems need.
func (c config) binaries() []string {
	out := []string{c.etcdBin}
	for sys, bin := range map[string]string{systemShardcron: c.shardcronBin, systemLeader: c.leaderBin, systemFloor: c.floorBin} {
		if c.uses(sys) {
			out = append(out, bin)
		}
	}
	return out
}

// bench is one benchmark run: its processes, etcd, the sink.
type bench struct {
	cfg                     config
	ps                      *procs
	shardcronBin, leaderBin string
	etcdURL                 string
	etcdProc                *proc
	cli                     *clientv3.Client
	sink                    *sink
	sinkURL                 string
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		os.Exit(2)
	}
	if cfg.replot != "" {
		if err := replot(cfg.replot, cfg.svgOut); err != nil {
			fmt.Fprintln(os.Stderr, "bench-cluster:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The sink is the instrument: its own collections would land in the
	// bursts it times (it allocates for every fire it records), adding the
	// same pause to every system's lag. Let its heap grow instead.
	go gcpace.Run(ctx, uint64(cfg.sinkHeadroomMiB)<<20, 5*time.Second)
	code := run(ctx, cfg)
	stop()
	os.Exit(code)
}

// run owns every process: whatever happens, they are killed before it
// returns.
func run(ctx context.Context, cfg config) int {
	dir, err := os.MkdirTemp("", "bench-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		return 1
	}
	b := &bench{cfg: cfg, ps: &procs{dir: dir}, sink: &sink{hold: 100 * time.Millisecond}}
	ok := false
	defer func() {
		b.ps.killAll()
		if ok && !cfg.keepLogs {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "bench-cluster: logs and etcd data kept in %s\n", dir)
		}
	}()
	if err := b.setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		return 1
	}
	defer b.cli.Close()
	start, load := time.Now(), loadAvg()
	res, err := b.runAll(ctx)
	res.Duration = time.Since(start).Round(time.Second).String()
	res.LoadStart, res.LoadEnd = load, loadAvg()
	report(os.Stdout, res, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		return 1
	}
	ok = true
	return 0
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// replot redraws the SVG from a JSON summary.
func replot(jsonPath, svgPath string) error {
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var res results
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	return os.WriteFile(svgPath, []byte(plot(res)), 0o644)
}

func (b *bench) setup(ctx context.Context) error {
	var err error
	for _, p := range b.cfg.binaries() {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("binary: %w (make bench-cluster builds them)", err)
		}
	}
	b.shardcronBin, b.leaderBin = b.cfg.shardcronBin, b.cfg.leaderBin
	if b.etcdProc, b.etcdURL, err = b.ps.startEtcd(ctx, b.cfg.etcdBin); err != nil {
		return err
	}
	if b.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{b.etcdURL}, DialTimeout: 5 * time.Second}); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b.sink, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l) // ends with the process; every client of it is a child killed on exit
	b.sinkURL = "http://" + l.Addr().String()
	return nil
}
