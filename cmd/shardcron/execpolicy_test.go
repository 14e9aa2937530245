package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/jobstore"
	"github.com/shardcron/shardcron/replica"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// TestExecAllowAndDisable: a replica started with --exec-allow runs the
// allowed program and fails the others without starting them, saying why
// in the run's history; with --exec=false it runs no exec job at all.
func TestExecAllowAndDisable(t *testing.T) {
	besideOthers(t)
	trueBin, echoBin := lookPath(t, "true"), lookPath(t, "echo")
	for _, tc := range []struct {
		name    string
		flags   []string
		allowed string // the outcome of the job running trueBin
		refused string // the detail of the job running echoBin
	}{
		{"allow-list", []string{"--exec-allow", trueBin}, "succeeded", `"` + echoBin + `" is not in --exec-allow`},
		{"disabled", []string{"--exec=false"}, "failed", "exec jobs are disabled (--exec=false)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := etcdtest.Start(t)
			env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=execpolicy"}
			jobs := writeFile(t, "jobs.yaml", "jobs:\n"+
				"  - {name: allowed, schedule: \"* * * * * *\", exec: {command: [\""+trueBin+"\"]}}\n"+
				"  - {name: refused, schedule: \"* * * * * *\", exec: {command: [\""+echoBin+"\", \"marker-never-printed\"]}}\n")
			if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
			}
			srv := startProc(t, "server", append([]string{"server", "--cluster", "execpolicy", "--node-id", "solo",
				"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4"}, tc.flags...)...)
			srv.HTTPAddr(30 * time.Second)
			var rep replica.Status
			// A run that meets the previous one still going is skipped
			// (concurrency forbid), so poll for a finished run of each.
			poll.MustEvery(t, procEvery, 30*time.Second, "the allowed job "+tc.allowed+", the refused one failed: "+tc.refused, poll.True(func() bool {
				out, _, code := runCLI(t, env, "status", "-o", "json")
				if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Jobs) != 2 {
					return false
				}
				allowed, refused := rep.Jobs[0].LastRuns, rep.Jobs[1].LastRuns
				return len(allowed) == 1 && string(allowed[0].Status) == tc.allowed &&
					len(refused) == 1 && refused[0].Status == "failed" && strings.Contains(refused[0].Detail, tc.refused)
			}))
			if srv.log.Contains("marker-never-printed") {
				t.Error("the refused program ran")
			}
		})
	}
}

// TestExecAllowContains: --exec-allow pins the program file the server's
// PATH finds, whatever the job set says. The jobs are written to etcd
// directly, as any etcd writer could, bypassing `validate`: a job's own
// PATH does not pick another `backup`, a symlink inside an allowed
// directory does not lead out of it, and an allowed interpreter does not
// take BASH_ENV from the job.
func TestExecAllowContains(t *testing.T) {
	besideOthers(t)
	bash, sh := lookPath(t, "bash"), lookPath(t, "sh")
	serverBin, planted, allowedDir := t.TempDir(), t.TempDir(), t.TempDir()
	script := func(path, body string) string {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	script(filepath.Join(serverBin, "backup"), "echo real-backup-ran")
	script(filepath.Join(planted, "backup"), "echo planted-backup-ran")
	evil := script(filepath.Join(planted, "evil.sh"), "echo bash-env-ran")
	if err := os.Symlink(sh, filepath.Join(allowedDir, "escape")); err != nil {
		t.Fatal(err)
	}
	serverPath := "PATH=" + serverBin + string(os.PathListSeparator) + os.Getenv("PATH")

	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ks := keyspace.New("contains")
	if _, err := shard.EnsureMeta(ctx, cli, ks, shard.DefaultMeta(4), nil); err != nil {
		t.Fatal(err)
	}
	jobs := []config.Job{
		{Name: "real", Exec: &config.ExecTarget{Command: []string{"backup"}}},
		{Name: "planted-path", Exec: &config.ExecTarget{Command: []string{"backup"}}, Env: map[string]string{"PATH": planted}},
		{Name: "symlink-escape", Exec: &config.ExecTarget{Command: []string{filepath.Join(allowedDir, "escape"), "-c", "echo symlink-escape-ran"}}},
		{Name: "bash-env", Exec: &config.ExecTarget{Command: []string{bash, "-c", "true"}}, Env: map[string]string{"BASH_ENV": evil}},
	}
	for i := range jobs {
		jobs[i].Schedule = "* * * * * *"
		jobs[i].SetDefaults()
	}
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=contains"}
	srv := startProcEnv(t, "server", []string{serverPath}, "server", "--cluster", "contains", "--node-id", "solo",
		"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s",
		"--exec-allow", "backup,"+allowedDir+"/,"+bash)
	srv.HTTPAddr(30 * time.Second)

	want := map[string]string{ // job -> its run's status, and a part of its detail or output
		"real":           "succeeded real-backup-ran",
		"planted-path":   "failed PATH",
		"symlink-escape": "failed is not in --exec-allow",
		"bash-env":       "failed BASH_ENV",
	}
	got := map[string]control.HistoryResult{}
	poll.MustEvery(t, procEvery, 30*time.Second, "every job has a finished run", poll.True(func() bool {
		for name := range want {
			var h control.HistoryResult
			out, _, code := runCLI(t, env, "history", name, "--limit", "3", "-o", "json")
			if code != 0 || json.Unmarshal([]byte(out), &h) != nil || !slices.ContainsFunc(h.Runs, finished) {
				return false
			}
			got[name] = h
		}
		return true
	}))
	for name, w := range want {
		status, part, _ := strings.Cut(w, " ")
		i := slices.IndexFunc(got[name].Runs, finished)
		r := got[name].Runs[i]
		if string(r.Status) != status || !strings.Contains(r.Detail+r.Output, part) {
			t.Errorf("%s: %s (%s) %q, want %s with %q", name, r.Status, r.Detail, r.Output, status, part)
		}
	}
	for _, m := range []string{"planted-backup-ran", "symlink-escape-ran", "bash-env-ran"} {
		if srv.log.Contains(m) {
			t.Errorf("%s: a program the allow-list does not pin ran", m)
		}
		for name, h := range got {
			for _, r := range h.Runs {
				if strings.Contains(r.Output, m) {
					t.Errorf("%s: %s: a program the allow-list does not pin ran", name, m)
				}
			}
		}
	}
}

// finished says whether a run ended (it was not skipped before starting).
func finished(r scheduler.Entry) bool {
	return r.Status == scheduler.StatusSucceeded || r.Status == scheduler.StatusFailed
}

// TestExecJobCannotReadServerEnviron: an exec job runs as the replica's
// user, but the replica is not dumpable, so the job cannot read the
// replica's /proc/PID/environ (its job secrets, an env-supplied etcd
// password) nor its memory.
func TestExecJobCannotReadServerEnviron(t *testing.T) {
	besideOthers(t)
	const marker = "environ-secret-marker-5k2j"
	etcd := etcdtest.Start(t)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=environ"}
	// The job's parent is its supervisor, whose parent is the server.
	jobs := writeFile(t, "jobs.yaml", "jobs:\n"+
		"  - name: snoop\n    schedule: \"* * * * * *\"\n    exec:\n      command: [sh, -c, 'p=$(cut -d\" \" -f4 /proc/$PPID/stat); echo server=$p; cat /proc/$p/environ']\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	srv := startProcCmd(t, "server", func(c *exec.Cmd) {
		c.Env = append(c.Env, "SHARDCRON_JOB_SNOOPED="+marker)
		if os.Geteuid() == 0 {
			asNobody(t, c) // root reads every process's environ, dumpable or not
		}
	}, "server", "--cluster", "environ", "--node-id", "solo",
		"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4")
	addr := srv.HTTPAddr(30 * time.Second)
	var h control.HistoryResult
	poll.MustEvery(t, procEvery, 30*time.Second, "the job has a finished run", poll.True(func() bool {
		out, _, code := runCLI(t, env, "history", "snoop", "--limit", "3", "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &h) == nil && slices.ContainsFunc(h.Runs, finished)
	}))
	// Undumpable, the server still reads its own /proc/self for /metrics.
	if resp, err := http.Get("http://" + addr + "/metrics"); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "process_open_fds ") {
			t.Errorf("/metrics: %s\n%s", resp.Status, b)
		}
	}
	r := h.Runs[slices.IndexFunc(h.Runs, finished)]
	if !strings.Contains(r.Output, "server="+itoa(srv.cmd.Process.Pid)) {
		t.Fatalf("the job did not find the server's pid %d: %s (%s) %q", srv.cmd.Process.Pid, r.Status, r.Detail, r.Output)
	}
	if strings.Contains(r.Output, marker) || r.Status != scheduler.StatusFailed {
		t.Errorf("the job read the server's environment: %s (%s) %q", r.Status, r.Detail, r.Output)
	}
}

// asNobody makes c run as uid and gid 65534, from a copy of the binary
// that user may execute.
func asNobody(t *testing.T, c *exec.Cmd) {
	dir, err := os.MkdirTemp("", "shardcron-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(binPath)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "shardcron"), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.Path = filepath.Join(dir, "shardcron")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// lookPath finds a program the test needs on this host's PATH.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
