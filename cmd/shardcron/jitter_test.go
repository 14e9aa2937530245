package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/cronspec"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestJitterAcrossOwnersThroughProcesses: a jittered job's runs start at
// their tick plus the job's offset for that tick, never before, on either
// of two replicas as the shard moves between them on a SIGTERM, and each
// carries the scheduled tick; each tick runs once, or again only as a
// marked re-run (the SIGTERM's drain may cut a run under way). Ticks the
// first owner handed over run when the successor takes the shard, side by
// side if several are due by then, so the ledger's order is not theirs.
func TestJitterAcrossOwnersThroughProcesses(t *testing.T) {
	besideOthers(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	const jitter = 4 * time.Second
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "jitter")
	jobs := writeFile(t, "jobs.yaml", fmt.Sprintf("jobs:\n  - {name: spread, schedule: \"*/5 * * * * *\", jitter: %v, concurrency: allow, "+
		"exec: {command: [%q, \"-c\", \"echo $SHARDCRON_TICK $SHARDCRON_NODE $(date +%%s%%N) ${SHARDCRON_RERUN:-false} >> %s\"]}}\n", jitter, sh, ledger))
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	read := func() []jitterRun {
		b, _ := os.ReadFile(ledger)
		var out []jitterRun
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(l)
			if len(f) != 4 {
				continue
			}
			tick, err1 := time.Parse(time.RFC3339, f[0])
			ns, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("ledger line %q", l)
			}
			out = append(out, jitterRun{tick, f[1], time.Unix(0, ns), f[3] == "true"})
		}
		return out
	}
	procs := map[string]*proc{"a": startOpsServer(t, etcd, "jitter", "a", 8), "b": startOpsServer(t, etcd, "jitter", "b", 8)}
	poll.MustEvery(t, procEvery, 60*time.Second, "two runs", poll.True(func() bool { return len(read()) >= 2 }))
	first := read()[0].node
	procs[first].signal(syscall.SIGTERM)
	if _, err := procs[first].Wait(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "two runs on the other replica", poll.True(func() bool {
		n := 0
		for _, l := range read() {
			if l.node != first {
				n++
			}
		}
		return n >= 2
	}))
	for _, fault := range jitterLedgerFaults(read(), first, jitter) {
		t.Error(fault)
	}
}

// jitterRun is a line of the jitter test's ledger: a run of job "spread".
type jitterRun struct {
	tick  time.Time
	node  string
	start time.Time
	rerun bool
}

// jitterLedgerFaults checks the runs of job "spread" (every 5 s, jittered
// up to jitter) on two replicas, the first of which was stopped gracefully:
// each run starts at its fire (tick + offset), not before, and an unmarked
// one within 3 s of it (or of the successor's takeover, when the first
// replica handed the tick over); every tick runs, once unmarked at most.
func jitterLedgerFaults(runs []jitterRun, first string, jitter time.Duration) []string {
	var faults []string
	// The successor takes the shard at some instant after the SIGTERM; the
	// ticks handed over to it run then, unmarked (never started), and
	// side by side: their order in the ledger is the order their shells
	// got a core, not their ticks'.
	var takeover time.Time
	for _, l := range runs {
		if l.node != first && (takeover.IsZero() || l.start.Before(takeover)) {
			takeover = l.start
		}
	}
	unmarked := map[int64]int{}
	var ticks []time.Time
	for i, l := range runs {
		fire := l.tick.Add(cronspec.JitterOffset("spread", l.tick, jitter))
		due := fire
		if l.node != first && takeover.After(due) {
			due = takeover
		}
		// A re-run is not bound: it starts when a successor takes the shard.
		if l.tick.Second()%5 != 0 || l.start.Before(fire) || (!l.rerun && l.start.After(due.Add(3*time.Second))) {
			faults = append(faults, fmt.Sprintf("run %d: tick %v by %s started %v; want its fire %v (tick + offset), not before, and by 3 s after %v", i, l.tick, l.node, l.start, fire, due))
		}
		if !l.rerun {
			unmarked[l.tick.UnixNano()]++
		}
		if !slices.ContainsFunc(ticks, l.tick.Equal) {
			ticks = append(ticks, l.tick)
		}
	}
	slices.SortFunc(ticks, time.Time.Compare)
	for i, tick := range ticks {
		if n := unmarked[tick.UnixNano()]; n > 1 {
			faults = append(faults, fmt.Sprintf("tick %v ran %d times unmarked: want once, or again only as a marked re-run", tick, n))
		}
		if i > 0 && !tick.Equal(ticks[i-1].Add(5*time.Second)) {
			faults = append(faults, fmt.Sprintf("tick %v follows %v: want every tick run", tick, ticks[i-1]))
		}
	}
	return faults
}

// TestJitterLedgerFaults: the ledger check accepts what CI saw on
// 2026-12-07 (two ticks handed over, run side by side on the successor 7
// s after the first's fire, the later one's shell first) and still finds
// a tick run twice unmarked, a tick never run, a run before its fire and
// an unmarked run late on its first owner.
func TestJitterLedgerFaults(t *testing.T) {
	const jitter = 4 * time.Second
	at := func(s string) time.Time {
		v, err := time.Parse("04:05.000", s)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 12, 7, 1, v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
	}
	fire := func(tick string) time.Time {
		return at(tick).Add(cronspec.JitterOffset("spread", at(tick), jitter))
	}
	run := func(tick, node string, start time.Time, rerun bool) jitterRun {
		return jitterRun{at(tick), node, start, rerun}
	}
	seen := []jitterRun{
		run("08:35.000", "b", fire("08:35.000").Add(20*time.Millisecond), false),
		run("08:40.000", "b", fire("08:40.000").Add(20*time.Millisecond), false),
		run("08:50.000", "a", at("08:52.510"), false),
		run("08:45.000", "a", at("08:52.980"), false),
		run("08:55.000", "a", fire("08:55.000").Add(20*time.Millisecond), false),
	}
	if faults := jitterLedgerFaults(seen, "b", jitter); len(faults) != 0 {
		t.Errorf("the ledger CI saw: %q, want no fault", faults)
	}
	for _, tc := range []struct {
		name string
		runs []jitterRun
		want string
	}{
		{"twice unmarked", append(slices.Clone(seen), run("08:45.000", "a", at("08:53.100"), false)), "ran 2 times unmarked"},
		{"a tick never run", slices.Delete(slices.Clone(seen), 1, 2), "want every tick run"},
		{"before its fire", append(slices.Clone(seen[:4]), run("08:55.000", "a", fire("08:55.000").Add(-time.Millisecond), false)), "not before"},
		{"late on its first owner", append([]jitterRun{run("08:30.000", "b", fire("08:30.000").Add(3100*time.Millisecond), false)}, seen...), "by 3 s after"},
	} {
		faults := jitterLedgerFaults(tc.runs, "b", jitter)
		if !slices.ContainsFunc(faults, func(f string) bool { return strings.Contains(f, tc.want) }) {
			t.Errorf("%s: faults %q, want one saying %q", tc.name, faults, tc.want)
		}
	}
	// A marked re-run of a tick its first owner started is no fault.
	if faults := jitterLedgerFaults(append(slices.Clone(seen), run("08:40.000", "a", at("08:52.600"), true)), "b", jitter); len(faults) != 0 {
		t.Errorf("a marked re-run: %q, want no fault", faults)
	}
}
