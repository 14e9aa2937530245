package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/runner"
)

// TestSignalledSupervisorRun: an exec job's supervisor is signalled while
// its job runs (someone's kill; `systemctl stop` and `pkill shardcron`
// signal the replica too): the job is stopped after its effect landed.
// Its owner goes on firing the shard, so it records the run as it ended,
// cancelled, and when it later hands the shard over gracefully, nobody
// runs that tick again. Before, the run was taken for one the Runner never
// started: it stayed in flight with no history while its owner kept the
// shard, the release named it as never started, and the successor ran it
// again unmarked.
func TestSignalledSupervisorRun(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	dir := t.TempDir()
	out, first := filepath.Join(dir, "runs"), filepath.Join(dir, "first")
	jobs := filepath.Join(dir, "jobs.yaml")
	// The first run takes 20 s (its supervisor is signalled meanwhile);
	// the rest end at once. forbid: one run at a time.
	cmd := execLine + out + `; [ -e ` + first + ` ] || { touch ` + first + `; sleep 20; }`
	if err := os.WriteFile(jobs, fmt.Appendf(nil, "jobs:\n  - name: victim\n    schedule: \"* * * * * *\"\n    concurrency: forbid\n    exec: {command: [/bin/sh, -c, %q]}\n", cmd), 0o644); err != nil {
		t.Fatal(err)
	}
	// a runs alone until the signalled run is recorded, so no rebalance
	// moves the shard while the test waits for that record: its premise is
	// an owner that goes on firing the shard.
	start := func(n string) *proc {
		p := startProc(t, n, "server", "--cluster", "interrupted", "--node-id", n,
			"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0",
			"--lease-ttl", "3s", "--shards", "8", "--drain-timeout", "2s", "--jobs", jobs)
		p.HTTPAddr(30 * time.Second)
		return p
	}
	const ownerName = "a"
	owner := start(ownerName)
	var signalled []fire
	poll.MustEvery(t, procEvery, 30*time.Second, "a first run of the job", poll.True(func() bool {
		signalled = execFires(t, out)
		return len(signalled) > 0
	}))
	tick := signalled[0].Tick.UTC().Format(time.RFC3339)
	if err := syscall.Kill(supervisorOf(t, owner.cmd.Process.Pid), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "tick "+tick+" recorded as cancelled by the signal", poll.True(func() bool {
		var h struct {
			Runs []struct{ Tick, Status, Detail string }
		}
		_ = json.Unmarshal([]byte(httpGet(t, owner.HTTPAddr(time.Second), "/api/v1/jobs/victim/runs?limit=100")), &h)
		return slices.ContainsFunc(h.Runs, func(r struct{ Tick, Status, Detail string }) bool {
			return r.Tick == tick && r.Status == "cancelled" && strings.Contains(r.Detail, "supervisor signalled")
		})
	}))
	// Now a successor joins, and a leaves: every shard is handed over
	// gracefully, by the rebalance or by a's release at its exit.
	start("b")
	owners := newOwnershipProbe(t, etcd.Endpoint(), "interrupted")
	poll.MustEvery(t, procEvery, 30*time.Second, "b holding shards", poll.True(func() bool {
		return len(owners.shardsOf("b")) > 0
	}))
	owner.signal(syscall.SIGTERM)
	if _, err := owner.Wait(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The successor runs a tick handed over in flight before any later
	// one: once it ran a tick of its own after the handoff, it decided
	// every tick it found in flight.
	handedAt := time.Now().Add(2 * time.Second)
	var again *fire
	poll.MustEvery(t, procEvery, 30*time.Second, "the successor firing after the handoff", poll.True(func() bool {
		fired := false
		for _, f := range execFires(t, out) {
			if f.Node == ownerName {
				continue
			}
			fired = fired || f.Tick.After(handedAt)
			if f.Tick.Equal(signalled[0].Tick) {
				again = &f
			}
		}
		return fired
	}))
	if again != nil {
		t.Errorf("the successor %s ran tick %s again (rerun %v), which %s had run and recorded as cancelled", again.Node, tick, again.Rerun, ownerName)
	}
}

// execLine is what an exec job appends: job, tick, token, node, its start
// in Unix nanoseconds and "true" on a re-run.
const execLine = `echo "$SHARDCRON_JOB $SHARDCRON_TICK $SHARDCRON_FENCING_TOKEN $SHARDCRON_NODE $(date +%s%N) $SHARDCRON_RERUN" >> `

// execFires reads the exec jobs' runs from the file they append to
// (execLine); every run is accepted, there being no receiver to judge it.
func execFires(t *testing.T, path string) []fire {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var fires []fire
	for l := range strings.Lines(string(data)) {
		if !strings.HasSuffix(l, "\n") {
			break // a line being written
		}
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("%s: line %q: want job, tick, token, node, start and maybe rerun", path, l)
		}
		tick, err := time.Parse(time.RFC3339Nano, f[1])
		token, err2 := strconv.ParseInt(f[2], 10, 64)
		at, err3 := strconv.ParseInt(f[4], 10, 64)
		if err := errors.Join(err, err2, err3); err != nil {
			t.Fatalf("%s: line %q: %v", path, l, err)
		}
		fires = append(fires, fire{Job: f[0], Tick: tick, Token: token, Node: f[3], At: time.Unix(0, at),
			Rerun: len(f) > 5 && f[5] == "true", Accepted: true})
	}
	return fires
}

// supervisorOf finds an exec supervisor the replica of pid started.
func supervisorOf(t *testing.T, pid int) int {
	t.Helper()
	var found []int
	poll.MustEvery(t, procEvery, 10*time.Second, "the supervisor of "+strconv.Itoa(pid), poll.True(func() bool {
		found = supervisorsOf(pid)
		return len(found) > 0
	}))
	return found[0]
}

// supervisorsOf lists the exec supervisors the replica of pid runs now:
// its children running the hidden subcommand.
func supervisorsOf(pid int) []int {
	var sups []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err1 := os.ReadFile(filepath.Join(d, "stat"))
		cmdline, err2 := os.ReadFile(filepath.Join(d, "cmdline"))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		// stat: pid (comm) state ppid ...; comm may hold spaces.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && bytes.Contains(cmdline, []byte(runner.SupervisorSubcommand)) {
			if n, err := strconv.Atoi(filepath.Base(d)); err == nil {
				sups = append(sups, n)
			}
		}
	}
	slices.Sort(sups)
	return sups
}
