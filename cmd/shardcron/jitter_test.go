package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// marked re-run (the SIGTERM's drain may cut a run under way).
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
	type line struct {
		tick  time.Time
		node  string
		start time.Time
		rerun bool
	}
	read := func() []line {
		b, _ := os.ReadFile(ledger)
		var out []line
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
			out = append(out, line{tick, f[1], time.Unix(0, ns), f[3] == "true"})
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
	var prev time.Time
	for i, l := range read() {
		fire := l.tick.Add(cronspec.JitterOffset("spread", l.tick, jitter))
		// A re-run starts when its successor takes the shard, later.
		if l.tick.Second()%5 != 0 || l.start.Before(fire) || (!l.rerun && l.start.After(fire.Add(3*time.Second))) {
			t.Errorf("run %d: tick %v by %s started %v; want its fire %v (tick + offset), not before", i, l.tick, l.node, l.start, fire)
		}
		switch {
		case l.rerun && l.tick.Equal(prev):
		case i > 0 && !l.tick.Equal(prev.Add(5*time.Second)):
			t.Errorf("run %d: tick %v (re-run %v) after %v: want each tick once, in order, or again marked", i, l.tick, l.rerun, prev)
		}
		prev = l.tick
	}
}
