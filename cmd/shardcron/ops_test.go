package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/replica"
)

// The operator commands through real processes: an etcd process, `shardcron
// server` processes, and the CLI binary.

const opsTTL = "3s"

func opsEnv(etcd *etcdtest.Process, cluster string) []string {
	return []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=" + cluster}
}

func startOpsServer(t *testing.T, etcd *etcdtest.Process, cluster, node string, shards int) *proc {
	t.Helper()
	p := startProc(t, node, "server", "--cluster", cluster, "--node-id", node, "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", opsTTL, "--shards", fmt.Sprint(shards), "--drain-timeout", "2s")
	p.HTTPAddr(30 * time.Second)
	return p
}

// cliJSON runs the CLI with -o json and decodes its output into v; a
// non-zero exit fails the test.
func cliJSON(t *testing.T, env []string, v any, args ...string) {
	t.Helper()
	out, stderr, code := runCLI(t, env, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
	}
	reflect.ValueOf(v).Elem().SetZero() // a reused v must not keep fields the output omits
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v -o json: %v\n%s", args, err, out)
	}
}

// TestSuspendResumeThroughProcesses: `suspend` stops one job on its owner
// and on the successor that takes its shard while it is suspended; an
// apply of a file that says nothing of suspension keeps it (and says so),
// export notes it; the other job keeps firing throughout, so ticks pass by
// the clock while the ledger gets nothing of the suspended job; `resume`
// starts it again from the resume, and no tick that came due while it was
// suspended ever runs, although its misfire policy is run_all.
func TestSuspendResumeThroughProcesses(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "suspend")
	led := newSink(slog.New(slog.DiscardHandler))
	ledger := httptest.NewServer(led)
	defer ledger.Close()
	jobs := writeFile(t, "jobs.yaml", "jobs:\n"+
		"  - {name: held, schedule: \"* * * * * *\", http: {url: \""+ledger.URL+"/held\"}, timeout: 5s, misfire: run_all, starting_deadline: 1m}\n"+
		"  - {name: other, schedule: \"* * * * * *\", http: {url: \""+ledger.URL+"/other\"}, timeout: 5s, misfire: run_all, starting_deadline: 1m}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	nodes := map[string]*proc{}
	for _, n := range []string{"node-1", "node-2"} {
		nodes[n] = startOpsServer(t, etcd, "suspend", n, 16)
	}
	ticks := func(job string, after time.Time) []time.Time {
		var out []time.Time
		for _, f := range led.Fires() {
			if f.Job == job && f.Accepted && f.Tick.After(after) {
				out = append(out, f.Tick)
			}
		}
		return out
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "held fires", poll.True(func() bool { return len(ticks("held", time.Time{})) > 0 }))

	var sr control.SuspendResult
	cliJSON(t, env, &sr, "suspend", "held")
	// The suspension is written when the command returns; the owner hears
	// of it through its watch a moment later, so ticks up to a second
	// after may still have been claimed and fired. None after.
	quietFrom := time.Now().Add(time.Second)
	if !sr.Suspended || !sr.Changed || !slices.Equal(sr.SuspendedBy, []string{"override"}) {
		t.Fatalf("suspend = %+v", sr)
	}
	var ar applyResult
	cliJSON(t, env, &ar, "apply", "-f", jobs)
	if ar.Applied || !slices.Equal(ar.Diff.Suspended, []string{"held"}) {
		t.Fatalf("apply of the unchanged file = %+v, want nothing applied and held kept suspended", ar)
	}
	exported, _, _ := runCLI(t, env, "export")
	if !strings.Contains(exported, "# suspended by `shardcron suspend`") || strings.Contains(exported, "suspend: true") {
		t.Errorf("export does not note the override as a comment (and only so):\n%s", exported)
	}

	// The owner of held's shard leaves; its successor must not run the
	// suspended ticks either.
	var st replica.Status
	cliJSON(t, env, &st, "status")
	owner := st.ShardSet[keyspace.ShardOf("held", st.Shards)].Owner
	if nodes[owner] == nil {
		t.Fatalf("held's shard is owned by %q", owner)
	}
	nodes[owner].signal(syscall.SIGTERM)
	if code, err := nodes[owner].Wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("SIGTERM %s: exit %d, %v", owner, code, err)
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "five ticks of other after the suspension, on the successor", poll.True(func() bool {
		return len(ticks("other", quietFrom)) >= 5
	}))
	if got := ticks("held", quietFrom); len(got) > 0 {
		t.Fatalf("held fired while suspended: ticks %v", got)
	}

	var rr control.SuspendResult
	cliJSON(t, env, &rr, "resume", "held")
	if rr.Suspended || !rr.Changed || rr.Resumed.IsZero() {
		t.Fatalf("resume = %+v", rr)
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "held fires again after the resume", poll.True(func() bool { return len(ticks("held", rr.Resumed)) >= 2 }))
	for _, tick := range ticks("held", quietFrom) {
		if !tick.After(rr.Resumed) {
			t.Errorf("tick %v of held came due while it was suspended (resumed at %v) and ran", tick, rr.Resumed)
		}
	}
	for _, f := range led.Fires() {
		if f.Dup || !f.Accepted {
			t.Errorf("ledger: %+v", f)
		}
	}
}

// TestHistoryAfterOwnerKilled: `history JOB` reads runs with their output
// from etcd, so they stay visible after the replica that ran them is
// SIGKILLed.
func TestHistoryAfterOwnerKilled(t *testing.T) {
	besideOthers(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "history")
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - {name: echoer, schedule: \"* * * * * *\", concurrency: allow, exec: {command: [\""+sh+"\", \"-c\", \"echo out-$SHARDCRON_TICK\"]}}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	srv := startOpsServer(t, etcd, "history", "solo", 8)
	succeeded := func(h control.HistoryResult) int {
		n := 0
		for _, r := range h.Runs {
			if r.Status == "succeeded" {
				n++
			}
		}
		return n
	}
	var h control.HistoryResult
	poll.MustEvery(t, procEvery, 60*time.Second, "three runs in history", poll.True(func() bool {
		out, _, code := runCLI(t, env, "history", "echoer", "--limit", "5", "-o", "json")
		h = control.HistoryResult{}
		return code == 0 && json.Unmarshal([]byte(out), &h) == nil && succeeded(h) >= 3
	}))
	srv.signal(syscall.SIGKILL)
	if _, err := srv.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	cliJSON(t, env, &h, "history", "echoer", "--limit", "5")
	if h.Job != "echoer" || h.Limit != 5 || succeeded(h) < 3 || len(h.Runs) > 5 {
		t.Fatalf("history after the owner's SIGKILL = %+v", h)
	}
	for i, r := range h.Runs {
		if r.Node != "solo" || r.Token <= 0 {
			t.Errorf("run %d = %+v", i, r)
		}
		// Skipped ticks (the first, before the job's since) have no run.
		if r.Status == "succeeded" && (r.Start.IsZero() || r.End.IsZero() || !strings.Contains(r.Output, "out-"+r.Tick.UTC().Format(time.RFC3339))) {
			t.Errorf("run %d = %+v", i, r)
		}
		if i > 0 && !r.Tick.Before(h.Runs[i-1].Tick) {
			t.Errorf("runs not newest first: %v then %v", h.Runs[i-1].Tick, r.Tick)
		}
	}
	table, _, code := runCLI(t, env, "history", "echoer")
	if code != 0 || !strings.Contains(table, "TICK") || !strings.Contains(table, "| out-") || !strings.Contains(table, "solo") {
		t.Errorf("history table: exit %d\n%s", code, table)
	}
	yml, _, code := runCLI(t, env, "history", "echoer", "-o", "yaml")
	if code != 0 || !strings.Contains(yml, "runs:") || !strings.Contains(yml, "node: solo") || !strings.Contains(yml, "token: ") {
		t.Errorf("history -o yaml: exit %d\n%s", code, yml)
	}
	if _, stderr, code := runCLI(t, env, "history", "absent"); code != 1 || !strings.Contains(stderr, `"absent"`) {
		t.Errorf("history of an unknown job: exit %d, %s", code, stderr)
	}
}

// TestPlanPredictsMoves: plan's prediction of a join, from the cluster's
// real membership and the meta's ring, equals the moves that happen when
// the replica really joins.
func TestPlanPredictsMoves(t *testing.T) {
	besideOthers(t)
	const shards = 64
	etcd := etcdtest.StartProcess(t)
	env := opsEnv(etcd, "plan")
	settled := func(members int) map[int]string {
		var owners map[int]string
		poll.MustEvery(t, procEvery, 60*time.Second, fmt.Sprintf("every shard at its desired owner among %d members", members), poll.True(func() bool {
			out, _, code := runCLI(t, env, "status", "-o", "json", "--limit", "0")
			var st replica.Status
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Members) != members || st.Unowned != 0 {
				return false
			}
			owners = map[int]string{}
			for _, s := range st.ShardSet {
				if s.Owner != s.Desired {
					return false
				}
				owners[s.Shard] = s.Owner
			}
			return true
		}))
		return owners
	}
	startOpsServer(t, etcd, "plan", "node-1", shards)
	startOpsServer(t, etcd, "plan", "node-2", shards)
	before := settled(2)

	var add, guess control.PlanResult
	cliJSON(t, env, &add, "plan", "--add", "node-3")
	cliJSON(t, env, &guess, "plan", "--replicas", "3")
	if !guess.AssumedNames || !slices.Equal(guess.Added, []string{"node-3"}) || !slices.Equal(guess.Moves, add.Moves) {
		t.Errorf("plan --replicas 3 = %+v, want node-3 guessed and the moves of --add node-3", guess)
	}
	if add.Moved == 0 || add.Moved != len(add.Moves) || add.Ideal == 0 || add.NotAtDesired != 0 {
		t.Fatalf("plan --add node-3 = %+v", add)
	}
	table, _, code := runCLI(t, env, "plan", "--add", "node-3")
	if code != 0 || !strings.Contains(table, fmt.Sprintf("would move %d shards; the ideal is %d", add.Moved, add.Ideal)) {
		t.Errorf("plan table: exit %d\n%s", code, table)
	}

	startOpsServer(t, etcd, "plan", "node-3", shards)
	after := settled(3)
	var happened []control.Move
	for s := range shards {
		if before[s] != after[s] {
			happened = append(happened, control.Move{Shard: s, From: before[s], To: after[s]})
		}
	}
	if !slices.Equal(happened, add.Moves) {
		t.Errorf("plan predicted %d moves %v;\n%d happened: %v", len(add.Moves), add.Moves, len(happened), happened)
	}
	t.Logf("plan --add node-3: %d moves predicted and done, ideal %d (%.2f×)", add.Moved, add.Ideal, add.Ratio)

	if _, stderr, code := runCLI(t, env, "plan", "--remove", "node-9"); code != 2 || !strings.Contains(stderr, "node-9") {
		t.Errorf("plan --remove of a non-member: exit %d, %s", code, stderr)
	}
}

// runCLIStdin is runCLI with stdin.
func runCLIStdin(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestStdinFormatsAndFuncJobs: -f - reads standard input and names it in
// errors; -o json|yaml print the result with the same fields; a func: job
// is refused by this binary, which registers no function, naming the file,
// line and field.
func TestStdinFormatsAndFuncJobs(t *testing.T) {
	besideOthers(t)
	good := "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n"
	out, stderr, code := runCLIStdin(t, good, "validate", "-f", "-")
	if code != 0 || out != "<stdin>: 1 jobs, valid\n" {
		t.Errorf("validate -f - (good): exit %d, %q %s", code, out, stderr)
	}
	var v validateResult
	if out, _, code = runCLIStdin(t, good, "validate", "-f", "-", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &v) != nil || !v.Valid || v.Jobs != 1 || v.File != "<stdin>" {
		t.Errorf("validate -o json: exit %d, %s", code, out)
	}
	if out, _, code = runCLIStdin(t, good, "validate", "-f", "-", "-o", "yaml", "--next", "0"); code != 0 || out != "file: <stdin>\njobs: 1\nvalid: true\n" {
		t.Errorf("validate -o yaml: exit %d, %q", code, out)
	}
	if _, stderr, code = runCLIStdin(t, "jobs:\n  - {name: a, schedule: \"@every 1m\", exec: {command: [x]}, misfre: skip}\n", "validate", "-f", "-"); code == 0 || !strings.Contains(stderr, "<stdin>:2") || !strings.Contains(stderr, "misfre") {
		t.Errorf("validate -f - (bad): exit %d, %s", code, stderr)
	}
	fn := writeFile(t, "jobs.yaml", "jobs:\n  - name: inproc\n    schedule: \"@every 1m\"\n    func: sweep\n")
	for _, args := range [][]string{{"validate", "-f", fn}, {"apply", "-f", fn, "--etcd-endpoints", "http://127.0.0.1:1"}} {
		_, stderr, code := runCLI(t, nil, args...)
		if code == 0 || !strings.Contains(stderr, fn+":4") || !strings.Contains(stderr, `field "func"`) || !strings.Contains(stderr, `"sweep"`) {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	if _, stderr, code := runCLI(t, nil, "version", "-o", "xml"); code != 2 || !strings.Contains(stderr, "--output") {
		t.Errorf("version -o xml: exit %d, %s", code, stderr)
	}
}
