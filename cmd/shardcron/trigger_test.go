package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// triggerSink records what each run sent. Path /flaky answers 503 to the
// first two attempts of every tick; /slow holds each request for
// slowFor before answering.
type triggerSink struct {
	slowFor time.Duration
	mu      sync.Mutex
	got     []sunk
}

type sunk struct {
	job, tick, node, trigger, triggerID, attempt, path string
	token                                              int64
	at                                                 time.Time
}

func (s *triggerSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Header
	token, _ := strconv.ParseInt(h.Get("Shardcron-Fencing-Token"), 10, 64)
	f := sunk{job: h.Get("Shardcron-Job"), tick: h.Get("Shardcron-Tick"), node: h.Get("Shardcron-Node"),
		trigger: h.Get("Shardcron-Trigger"), triggerID: h.Get("Shardcron-Trigger-Id"),
		attempt: h.Get("Shardcron-Attempt"), path: r.URL.Path, token: token, at: time.Now()}
	s.mu.Lock()
	s.got = append(s.got, f)
	s.mu.Unlock()
	switch r.URL.Path {
	case "/flaky":
		if n, _ := strconv.Atoi(f.attempt); n < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
	case "/slow":
		time.Sleep(s.slowFor) // the receiver's own work: it keeps a run in flight
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *triggerSink) of(job string) []sunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sunk
	for _, f := range s.got {
		if f.job == job {
			out = append(out, f)
		}
	}
	return out
}

// triggerOut runs `trigger ... -o json` and decodes its result.
func triggerOut(t *testing.T, env []string, args ...string) (control.TriggerResult, string, int) {
	t.Helper()
	out, stderr, code := runCLI(t, env, append([]string{"trigger", "-o", "json"}, args...)...)
	var res control.TriggerResult
	if code == 0 || strings.HasPrefix(strings.TrimSpace(out), "{") {
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("trigger %v: exit %d, output %q: %v\n%s", args, code, out, err, stderr)
		}
	}
	return res, stderr, code
}

// TestTriggerCommand: `trigger JOB --wait` runs the job once, now, on its
// owner, marked manual in its headers and its history; a job suspended by
// its file or by `shardcron suspend` is refused with a message that says
// what lifts it, and nothing written; the API does the same;
// a job with retries whose receiver fails the first two attempts succeeds
// on the third, which history and the metric count.
func TestTriggerCommand(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	rx := &triggerSink{}
	srv := httptest.NewServer(rx)
	t.Cleanup(srv.Close)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=trig"}
	jobs := writeFile(t, "jobs.yaml", fmt.Sprintf(`jobs:
  - name: manual-only
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/fire"}
  - name: paused
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/fire"}
    suspend: true
  - name: flaky
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/flaky"}
    retries: {attempts: 3, backoff: 100ms}
  - name: held
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/fire"}
`, srv.URL))
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	p := startProc(t, "server", "server", "--cluster", "trig", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4")
	addr := p.HTTPAddr(30 * time.Second)
	probe := newOwnershipProbe(t, etcd.Endpoint(), "trig")
	waitTrue(t, "every shard owned by solo", func() bool { return probe.allOwnedBy(4, "solo") })

	res, stderr, code := triggerOut(t, env, "manual-only", "--wait", "--by", "tester")
	if code != 0 || res.Run == nil || res.Run.Status != scheduler.StatusSucceeded || res.Run.Trigger != res.ID ||
		res.Run.TriggeredBy != "tester" || res.Run.Node != "solo" || res.Owner != "solo" {
		t.Fatalf("trigger --wait: exit %d, %+v (run %+v)\n%s", code, res, res.Run, stderr)
	}
	got := rx.of("manual-only")
	if len(got) != 1 || got[0].trigger != "manual" || got[0].triggerID != res.ID || strings.HasSuffix(got[0].tick, ":00Z") {
		t.Fatalf("receiver got %+v, want one manual run of trigger %s off the whole second", got, res.ID)
	}

	// Refused: suspended by the file or by `suspend` (nothing written, the
	// message says what lifts it), unknown.
	out, stderr, code := runCLI(t, env, "trigger", "paused")
	if code != 1 || !strings.Contains(stderr, `job "paused" is suspended by the applied jobs file`) {
		t.Errorf("trigger of a file-suspended job: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, env, "suspend", "held"); code != 0 {
		t.Fatalf("suspend held: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, env, "trigger", "held"); code != 1 ||
		!strings.Contains(stderr, `job "held" is suspended by `+"`shardcron suspend`"+`; resume it first (shardcron resume held)`) {
		t.Errorf("trigger of an override-suspended job: exit %d\n%s%s", code, out, stderr)
	}
	if code, body := httpPost(t, addr, "/api/v1/jobs/held/trigger"); code != http.StatusConflict || !strings.Contains(body, "shardcron resume held") {
		t.Errorf("POST trigger of an override-suspended job: %d %s", code, body)
	}
	if _, stderr, code := runCLI(t, env, "trigger", "nosuch"); code != 1 || !strings.Contains(stderr, `no job "nosuch"`) {
		t.Errorf("trigger of an unknown job: exit %d\n%s", code, stderr)
	}
	cli := etcdtest.NewClient(t, etcd.Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := cli.Get(ctx, keyspace.New("trig").Triggers(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("trigger requests left in etcd: %v, %v", resp, err)
	}

	// The API: 409 for the suspended job, 200 with the outcome when waited.
	if code, body := httpPost(t, addr, "/api/v1/jobs/paused/trigger"); code != http.StatusConflict || !strings.Contains(body, "suspended") {
		t.Errorf("POST trigger of a suspended job: %d %s", code, body)
	}
	code, body := httpPost(t, addr, "/api/v1/jobs/manual-only/trigger?wait=30s")
	var api control.TriggerResult
	if err := json.Unmarshal([]byte(body), &api); code != http.StatusOK || err != nil || api.Run == nil ||
		api.Run.Status != scheduler.StatusSucceeded || !strings.HasPrefix(api.By, "api@127.0.0.1") {
		t.Errorf("POST trigger?wait: %d %s", code, body)
	}
	if n := len(rx.of("manual-only")); n != 2 {
		t.Errorf("manual-only ran %d times, want 2", n)
	}

	// Retries: the third attempt succeeds.
	res, stderr, code = triggerOut(t, env, "flaky", "--wait")
	if code != 0 || res.Run == nil || res.Run.Status != scheduler.StatusSucceeded || res.Run.Attempts != 3 {
		t.Fatalf("trigger flaky --wait: exit %d, run %+v\n%s", code, res.Run, stderr)
	}
	attempts := rx.of("flaky")
	if len(attempts) != 3 || attempts[0].attempt != "" || attempts[1].attempt != "2" || attempts[2].attempt != "3" ||
		attempts[0].tick != attempts[2].tick || attempts[0].token != attempts[2].token {
		t.Errorf("flaky's attempts as received: %+v, want three of one tick and token", attempts)
	}
	var runs struct{ Runs []scheduler.Entry }
	if err := json.Unmarshal([]byte(httpGet(t, addr, "/api/v1/jobs/flaky/runs")), &runs); err != nil ||
		len(runs.Runs) != 1 || runs.Runs[0].Attempts != 3 || runs.Runs[0].Status != scheduler.StatusSucceeded {
		t.Errorf("flaky's history: %+v, %v", runs.Runs, err)
	}
	if got := scrapeMetrics(t, addr).get("shardcron_scheduler_run_retries_total"); got != 2 {
		t.Errorf("shardcron_scheduler_run_retries_total = %v, want 2", got)
	}
}

func httpPost(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/json", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTriggerDuringGracefulHandoff: a trigger written while the owner of
// its shard drains it (a graceful handoff, held open by a run in flight)
// runs exactly once, on the successor, and the run the drain waited for
// completes on the old owner once.
func TestTriggerDuringGracefulHandoff(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	rx := &triggerSink{slowFor: 5 * time.Second}
	srv := httptest.NewServer(rx)
	t.Cleanup(srv.Close)
	env := []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=handoff"}
	// One shard: both jobs, and the whole job space, move together.
	jobs := writeFile(t, "jobs.yaml", fmt.Sprintf(`jobs:
  - name: holder
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/slow"}
    timeout: 30s
  - name: target
    schedule: "0 0 3 1 1 *"
    http: {url: "%[1]s/fire"}
`, srv.URL))
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	for _, n := range []string{"n1", "n2"} {
		startProc(t, n, "server", "--cluster", "handoff", "--node-id", n, "--etcd-endpoints", etcd.Endpoint(),
			"--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "1", "--drain-timeout", "10s").HTTPAddr(30 * time.Second)
	}
	probe := newOwnershipProbe(t, etcd.Endpoint(), "handoff")
	var owner string
	waitTrue(t, "shard 0 owned", func() bool { owner = probe.owners()[0]; return owner != "" })
	// Both members counted: once both are, the owner is the desired one.
	waitTrue(t, "both members counted, shard 0 with its desired owner", func() bool {
		out, _, code := runCLI(t, env, "status", "-o", "json")
		var rep statusJSON
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Members) != 2 {
			return false
		}
		owner = rep.ShardSet[0].Owner
		return owner != "" && owner == rep.ShardSet[0].Desired
	})
	if _, stderr, code := runCLI(t, env, "trigger", "holder"); code != 0 {
		t.Fatalf("trigger holder: exit %d\n%s", code, stderr)
	}
	waitTrue(t, "holder's run in flight", func() bool { return len(rx.of("holder")) == 1 })
	if out, stderr, code := runCLI(t, env, "drain", owner); code != 0 {
		t.Fatalf("drain %s: exit %d\n%s%s", owner, code, out, stderr)
	}
	res, stderr, code := triggerOut(t, env, "target", "--wait")
	if code != 0 || res.Run == nil || res.Run.Status != scheduler.StatusSucceeded {
		t.Fatalf("trigger target --wait: exit %d, %+v\n%s", code, res.Run, stderr)
	}
	holder := rx.of("holder")
	if len(holder) != 1 || holder[0].node != owner {
		t.Errorf("holder's runs %+v, want one on %s", holder, owner)
	}
	// The trigger landed during the handoff: after the drain began (the
	// holder's run still held it open), before the successor took the
	// shard, which it then ran on.
	if !res.RequestedAt.Before(holder[0].at.Add(rx.slowFor)) {
		t.Errorf("the trigger (%v) was written after the holder's run ended (%v): not during the handoff",
			res.RequestedAt, holder[0].at.Add(rx.slowFor))
	}
	target := rx.of("target")
	if len(target) != 1 || target[0].node == owner || target[0].triggerID != res.ID || res.Run.Node == owner {
		t.Errorf("target's runs %+v (history %+v), want exactly one, on the successor", target, res.Run)
	}
	if code := waitExit(t, env, owner); code != 0 {
		t.Errorf("%s still holds shards", owner)
	}
}

// statusJSON is what these tests read of `status -o json`.
type statusJSON struct {
	Members  []shard.MemberState `json:"members"`
	ShardSet []shard.ShardState  `json:"shards"`
}

// waitTrue polls cond (a CLI call, a read of etcd) every 100 ms for up to
// 30 s, or fails the test.
func waitTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.MustEvery(t, 100*time.Millisecond, 30*time.Second, what, poll.True(cond))
}

// waitExit waits (via drain --wait) until node holds no shard.
func waitExit(t *testing.T, env []string, node string) int {
	t.Helper()
	_, _, code := runCLI(t, env, "drain", node, "--wait", "--timeout", "30s")
	return code
}
