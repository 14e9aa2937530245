package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestOneShotThroughProcesses: a one-shot job runs once, at its instant,
// and stays done across a SIGKILL, a new replica and a restart; a one-shot
// whose instant passed while no replica ran runs once when one comes back.
// Each run appends its tick to a file of its own: the ledger.
func TestOneShotThroughProcesses(t *testing.T) {
	besideOthers(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "oneshot")
	now := time.Now().UTC().Truncate(time.Second)
	onTime, missed := now.Add(6*time.Second), now.Add(14*time.Second)
	job := func(name string, at time.Time) string {
		return fmt.Sprintf("  - {name: %s, at: %s, exec: {command: [%q, \"-c\", \"echo $SHARDCRON_TICK >> %s\"]}}\n",
			name, at.Format(time.RFC3339), sh, filepath.Join(dir, name))
	}
	jobs := writeFile(t, "jobs.yaml", "jobs:\n"+job("on-time", onTime)+job("missed", missed))
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	ledger := func(name string) []string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.Fields(string(b))
	}
	var st struct {
		Jobs []struct {
			Name string `json:"name"`
			Done bool   `json:"done"`
		} `json:"jobs"`
	}
	done := func(name string) bool {
		cliJSON(t, env, &st, "status")
		for _, j := range st.Jobs {
			if j.Name == name {
				return j.Done
			}
		}
		return false
	}
	a := startOpsServer(t, etcd, "oneshot", "a", 8)
	poll.MustEvery(t, procEvery, 30*time.Second, "the on-time one-shot ran", poll.True(func() bool { return len(ledger("on-time")) > 0 }))
	if ran := time.Now(); ran.Sub(onTime) < 0 {
		t.Errorf("ran before its instant")
	}
	// Killed between runs: once its completion is recorded (a kill while
	// the run is in flight makes the successor re-run it, marked).
	poll.MustEvery(t, procEvery, 30*time.Second, "the on-time one-shot done", poll.True(func() bool { return done("on-time") }))
	a.signal(syscall.SIGKILL)
	if _, err := a.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	poll.HoldsEvery(t, procEvery, time.Until(missed.Add(2*time.Second)), "no run of the missed one-shot while no replica is up",
		poll.True(func() bool { return len(ledger("missed")) == 0 }))
	b := startOpsServer(t, etcd, "oneshot", "b", 8)
	poll.MustEvery(t, procEvery, 30*time.Second, "the missed one-shot ran on return", poll.True(func() bool { return len(ledger("missed")) > 0 }))
	// Stopped between runs: once its completion is recorded (a drain that
	// cuts the run short leaves it for the successor, marked).
	poll.MustEvery(t, procEvery, 30*time.Second, "the missed one-shot done", poll.True(func() bool { return done("missed") }))
	b.signal(syscall.SIGTERM)
	if _, err := b.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	startOpsServer(t, etcd, "oneshot", "a", 8) // a restart, memory lost
	poll.MustEvery(t, procEvery, 30*time.Second, "status shows both done", poll.True(func() bool {
		return done("on-time") && done("missed")
	}))
	// A wrong re-run would land within seconds of the restart: each
	// one-shot stays run once, checked throughout.
	poll.HoldsEvery(t, procEvery, 3*time.Second, "each one-shot run once, at its instant", func() error {
		for name, want := range map[string]time.Time{"on-time": onTime, "missed": missed} {
			if got := ledger(name); len(got) != 1 || got[0] != want.Format(time.RFC3339) {
				return fmt.Errorf("%s ran %v, want once, tick %v", name, got, want.Format(time.RFC3339))
			}
		}
		return nil
	})
}
