package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/replica"
)

const hookSecret = "hook-s3cret"

// flakyTarget fails the first three distinct ticks it is sent and
// answers every later one with success; a re-run of a tick gets the
// answer its tick got first.
type flakyTarget struct {
	mu    sync.Mutex
	ticks []string
}

func (f *flakyTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tick := r.Header.Get("Shardcron-Tick")
	f.mu.Lock()
	i := indexOf(f.ticks, tick)
	if i < 0 {
		f.ticks = append(f.ticks, tick)
		i = len(f.ticks) - 1
	}
	f.mu.Unlock()
	if i < 3 {
		http.Error(w, "down", http.StatusInternalServerError)
	}
}

func (f *flakyTarget) distinct() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ticks...)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// hookNote is one notification a webhook received.
type hookNote struct {
	kind, key, tick, rerun string
	body                   map[string]any
	sigOK                  bool
}

// hookSink is the webhook receiver: it keeps every notification and
// checks its signature as docs/notifications.md says.
type hookSink struct {
	mu    sync.Mutex
	notes []hookNote
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := hookNote{kind: r.Header.Get("Shardcron-Notification"), key: r.Header.Get("Shardcron-Idempotency-Key"),
		tick: r.Header.Get("Shardcron-Tick"), rerun: r.Header.Get("Shardcron-Rerun"),
		sigOK: validSignature(r.Header.Get("Shardcron-Signature"), body)}
	_ = json.Unmarshal(body, &n.body)
	h.mu.Lock()
	h.notes = append(h.notes, n)
	h.mu.Unlock()
}

func (h *hookSink) all() []hookNote {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookNote(nil), h.notes...)
}

// validSignature verifies "t=<unix>,v1=<hex hmac>" over "<t>." + body.
func validSignature(header string, body []byte) bool {
	ts, sig, ok := strings.Cut(strings.TrimPrefix(header, "t="), ",v1=")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hmac.Equal([]byte(sig), []byte(hex.EncodeToString(m.Sum(nil))))
}

// TestNotificationsThroughProcesses: a job failing three times then
// succeeding sends exactly one failure notification (after the third
// failure) and one recovery, signed, with the run's identity, also when
// the owner is SIGKILLed between the second failure and the third.
// The two cases, each an etcd and two replicas, run side by side as well.
func TestNotificationsThroughProcesses(t *testing.T) {
	besideOthers(t)
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			t.Parallel()
			notifyThroughProcesses(t, kill)
		})
	}
}

func notifyThroughProcesses(t *testing.T, kill bool) {
	etcd := etcdtest.StartProcess(t)
	cluster := "notify"
	env := opsEnv(etcd, cluster)
	target, hooks := &flakyTarget{}, &hookSink{}
	ts, hs := httptest.NewServer(target), httptest.NewServer(hooks)
	defer ts.Close()
	defer hs.Close()
	jobs := writeFile(t, "jobs.yaml", "defaults:\n"+
		"  notify: {after: 3, webhook: {url: \""+hs.URL+"/hook\", secret: \"${SHARDCRON_JOB_HOOK_SECRET}\"}}\n"+
		"jobs:\n"+
		"  - {name: flaky, schedule: \"*/8 * * * * *\", http: {url: \""+ts.URL+"/flaky\"}, timeout: 5s, misfire: run_all}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	nodes := map[string]*proc{}
	for _, n := range []string{"node-1", "node-2"} {
		nodes[n] = startNotifyServer(t, etcd, cluster, n)
	}
	exact := true // no repeat at all: no fault while a notification is in flight
	if kill {
		// The owner, once the first run is recorded (members settled);
		// then both failures durable (history is written after the
		// completions), and the owner dies before the third tick.
		poll.MustEvery(t, procEvery, 60*time.Second, "a failure recorded", poll.True(func() bool { return failedRuns(t, env) >= 1 }))
		var st replica.Status
		cliJSON(t, env, &st, "status")
		owner := nodes[st.ShardSet[keyspace.ShardOf("flaky", st.Shards)].Owner]
		if owner == nil {
			t.Fatal("flaky's shard has no owner among the nodes")
		}
		poll.MustEvery(t, procEvery, 60*time.Second, "two failures recorded", poll.True(func() bool { return failedRuns(t, env) >= 2 }))
		owner.signal(syscall.SIGKILL)
		if _, err := owner.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		// A slow machine may let the third run (and its notification)
		// happen before the kill: then a marked repeat is allowed.
		if n := len(target.distinct()); n != 2 {
			t.Logf("the target saw %d ticks by the kill, not 2: a marked repeat is allowed", n)
			exact = false
		}
	}
	poll.MustEvery(t, procEvery, 90*time.Second, "a recovery notification", poll.True(func() bool {
		for _, n := range hooks.all() {
			if n.kind == "recovery" {
				return true
			}
		}
		return false
	}))
	poll.HoldsEvery(t, procEvery, 3*time.Second, "one failure (the third tick) and one recovery (the fourth), signed", func() error {
		return checkNotes(hooks.all(), target.distinct(), exact)
	})
	var h control.HistoryResult
	cliJSON(t, env, &h, "history", "flaky")
	for _, e := range h.Runs {
		if e.Tick.UTC().Format(time.RFC3339) == target.distinct()[2] && (e.Notify != "failure" || e.NotifyResult != "sent") {
			t.Errorf("history of the third failure %+v: want it to name the failure notification, sent", e)
		}
	}
}

// checkNotes says what is wrong with the notifications received, given
// the ticks the target saw (the first three failed): one unmarked of each
// kind, any repeat marked, and with exact no repeat.
func checkNotes(notes []hookNote, ticks []string, exact bool) error {
	if len(ticks) < 4 {
		return fmt.Errorf("target saw ticks %v, want at least 4", ticks)
	}
	want := map[string]string{"failure": ticks[2], "recovery": ticks[3]}
	seen, unmarked := map[string]bool{}, map[string]bool{}
	for _, n := range notes {
		switch {
		case !n.sigOK:
			return fmt.Errorf("%s notification with a bad signature", n.kind)
		case want[n.kind] == "" || n.tick != want[n.kind]:
			return fmt.Errorf("%s notification of tick %s; want failure of %s, recovery of %s", n.kind, n.tick, ticks[2], ticks[3])
		case n.key != cluster(n)+"/flaky/"+n.tick+"/"+n.kind:
			return fmt.Errorf("idempotency key %q", n.key)
		case n.rerun != "true" && unmarked[n.kind]:
			return fmt.Errorf("%s notification repeated unmarked", n.kind)
		}
		seen[n.kind] = true
		unmarked[n.kind] = unmarked[n.kind] || n.rerun != "true"
	}
	if !seen["failure"] || !seen["recovery"] {
		return fmt.Errorf("received %d notifications, want a failure and a recovery", len(notes))
	}
	if exact && len(notes) != 2 {
		return fmt.Errorf("received %d notifications, want exactly 2", len(notes))
	}
	return nil
}

func cluster(n hookNote) string { s, _ := n.body["cluster"].(string); return s }

// failedRuns counts the failed runs of flaky in its history.
func failedRuns(t *testing.T, env []string) int {
	out, _, code := runCLI(t, env, "history", "flaky", "-o", "json")
	var h control.HistoryResult
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil {
		return -1
	}
	n := 0
	for _, e := range h.Runs {
		if e.Status == "failed" {
			n++
		}
	}
	return n
}

// startNotifyServer is startOpsServer with the webhook's secret in the
// server's environment, where ${SHARDCRON_JOB_HOOK_SECRET} is expanded.
func startNotifyServer(t *testing.T, etcd *etcdtest.Process, cluster, node string) *proc {
	t.Helper()
	p := startProcCmd(t, node, func(c *exec.Cmd) { c.Env = append(c.Env, "SHARDCRON_JOB_HOOK_SECRET="+hookSecret) },
		"server", "--cluster", cluster, "--node-id", node, "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", opsTTL, "--shards", "16", "--drain-timeout", "2s")
	p.HTTPAddr(30 * time.Second)
	return p
}

// TestValidateNeverShowsTheWebhook: validate's output, in every format,
// holds no part of a notification webhook (its URL, headers, secret).
func TestValidateNeverShowsTheWebhook(t *testing.T) {
	besideOthers(t)
	jobs := writeFile(t, "jobs.yaml", "defaults:\n"+
		"  notify: {webhook: {url: \"http://hooks.internal/?k=url-s3cret\", headers: {X-K: header-s3cret}, secret: literal-s3cret}}\n"+
		"jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n")
	for _, o := range []string{"table", "json", "yaml"} {
		out, stderr, code := runCLI(t, nil, "validate", "-f", jobs, "-o", o)
		if code != 0 || strings.Contains(out+stderr, "s3cret") {
			t.Errorf("validate -o %s: exit %d\n%s%s", o, code, out, stderr)
		}
	}
}
