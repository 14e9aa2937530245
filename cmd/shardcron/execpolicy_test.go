package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/replica"
)

// TestExecAllowAndDisable: a replica started with --exec-allow runs the
// allowed program and fails the others without starting them, saying why
// in the run's history; with --exec=false it runs no exec job at all.
func TestExecAllowAndDisable(t *testing.T) {
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	echoBin, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
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
