package runner

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// testItem is item 3 of 8 of a job with item_names.
var testItem = config.Item{Index: 3, Count: 8, Name: "eu-west"}

// An item's run sends the item's three headers, which the job cannot
// forge, and expands the item variables in its url, headers and body; a
// plain run sends none and cannot reach the item variables, not even
// through the server's environment.
func TestHTTPItemIdentityAndExpansion(t *testing.T) {
	t.Setenv("SHARDCRON_JOB_REGION", "eu")
	t.Setenv(config.VarItem, "from-the-server")
	rc := newReceiver(t, nil)
	rn := newRunner(t, nil)
	job := httpJob(rc.URL + "/part/${SHARDCRON_ITEM}?of=${SHARDCRON_ITEMS}&name=${SHARDCRON_ITEM_NAME}")
	job.HTTP.Headers = map[string]string{"X-Part": "${SHARDCRON_ITEM_NAME}-${SHARDCRON_JOB_REGION}",
		HeaderItem: "99", HeaderItemName: "forged"}
	job.HTTP.Body = `{"item":${SHARDCRON_ITEM},"items":${SHARDCRON_ITEMS},"name":"${SHARDCRON_ITEM_NAME}"}`
	r := testRun(job, slidingDeadline{time.Minute})
	r.Item = testItem
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	reqs, dumps := rc.requests()
	got := reqs[0]
	for k, v := range map[string]string{HeaderItem: "3", HeaderItems: "8", HeaderItemName: "eu-west", "X-Part": "eu-west-eu"} {
		if g := got.Header.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	if got.URL.Path != "/part/3" || got.URL.RawQuery != "of=8&name=eu-west" {
		t.Errorf("url %s, want /part/3?of=8&name=eu-west", got.URL)
	}
	if want := `{"item":3,"items":8,"name":"eu-west"}`; !strings.HasSuffix(dumps[0], want) {
		t.Errorf("body not expanded, want %s:\n%s", want, dumps[0])
	}

	plain := httpJob(rc.URL + "/plain")
	plain.HTTP.Headers = map[string]string{HeaderItem: "99"}
	if res := rn.Run(context.Background(), testRun(plain, slidingDeadline{time.Minute})); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("plain: status %s (%s)", res.Status, res.Detail)
	}
	reqs, _ = rc.requests()
	for _, h := range []string{HeaderItem, HeaderItems, HeaderItemName} {
		if v, ok := reqs[1].Header[h]; ok {
			t.Errorf("plain run sent %s: %q", h, v)
		}
	}
	// Validation refuses an item variable in a plain job; one built in
	// code fails before anything is sent.
	plain.HTTP.URL = rc.URL + "/plain/${SHARDCRON_ITEM}"
	res := rn.Run(context.Background(), testRun(plain, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || strings.Contains(res.Detail, "from-the-server") {
		t.Errorf("plain run with ${SHARDCRON_ITEM}: status %s (%s), want failed", res.Status, res.Detail)
	}
	if reqs, _ = rc.requests(); len(reqs) != 2 {
		t.Errorf("%d requests, want 2: the plain run with ${SHARDCRON_ITEM} was sent", len(reqs))
	}
}

// An item's values are no secrets: the detail keeps them as they are (item
// 1's "1" is not put back as ${SHARDCRON_ITEM} in 127.0.0.1), while a
// SHARDCRON_JOB_* value is still redacted.
func TestItemValuesNotRedacted(t *testing.T) {
	const secret = "item-key-marker-77bb"
	t.Setenv("SHARDCRON_JOB_KEY", secret)
	rc := newReceiver(t, nil)
	url := rc.URL
	rc.Close() // refuses connections now
	rn := newRunner(t, nil)
	r := testRun(httpJob(url+"/${SHARDCRON_ITEM}/x?key=${SHARDCRON_JOB_KEY}"), slidingDeadline{time.Minute})
	r.Item = config.Item{Index: 1, Count: 10, Name: "1"}
	res := rn.Run(context.Background(), r)
	if res.Status != scheduler.StatusFailed || strings.Contains(res.Detail, secret) || !strings.Contains(res.Detail, "${SHARDCRON_JOB_KEY}") {
		t.Errorf("detail %q: want failed, the secret redacted", res.Detail)
	}
	if !strings.Contains(res.Detail, "127.0.0.1") || !strings.Contains(res.Detail, "/1/x") || strings.Contains(res.Detail, "${SHARDCRON_ITEM") {
		t.Errorf("detail %q: want the item's values as they are", res.Detail)
	}
}

// An item's exec run gets the item's variables, which its env cannot
// forge; they expand in its env and arguments, where nothing else does.
func TestExecItemEnvAndArgs(t *testing.T) {
	t.Setenv("SHARDCRON_JOB_REGION", "eu")
	rn := newRunner(t, nil)
	job := execJob("parts", "sh", "-c", `printf 'arg1=%s\narg2=%s\n' "$1" "$2"; env`, "sh",
		"${SHARDCRON_ITEM}/${SHARDCRON_ITEMS}", "${SHARDCRON_ITEM_NAME} ${HOME} ${SHARDCRON_JOB_REGION}")
	job.Env = map[string]string{"PART": "${SHARDCRON_ITEM_NAME}-${SHARDCRON_JOB_REGION}", EnvItem: "99", EnvItemName: "forged"}
	r := testRun(job, slidingDeadline{time.Minute})
	r.Item = testItem
	res := rn.Run(context.Background(), r)
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s): %s", res.Status, res.Detail, res.Output)
	}
	got := outputVars(res.Output)
	for k, v := range map[string]string{EnvItem: "3", EnvItems: "8", EnvItemName: "eu-west", "PART": "eu-west-eu",
		"arg1": "3/8", "arg2": "eu-west ${HOME} ${SHARDCRON_JOB_REGION}"} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	rn.nextPids(t)

	plain := execJob("plain", "sh", "-c", `env; echo "arg1=$1"`, "sh", "${SHARDCRON_ITEM}")
	plain.Env = map[string]string{EnvItem: "99"}
	res = rn.Run(context.Background(), testRun(plain, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("plain: status %s (%s): %s", res.Status, res.Detail, res.Output)
	}
	got = outputVars(res.Output)
	for _, k := range []string{EnvItem, EnvItems, EnvItemName} {
		if v, ok := got[k]; ok {
			t.Errorf("plain run has %s=%q", k, v)
		}
	}
	if got["arg1"] != "${SHARDCRON_ITEM}" {
		t.Errorf("plain run's argument %q, want it as written", got["arg1"])
	}
	rn.nextPids(t)
}

// outputVars reads NAME=value lines.
func outputVars(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	return got
}

// An item's notification names the item in its headers, its body (with a
// link to the item's own runs) and its idempotency key.
func TestNotifyItem(t *testing.T) {
	var body []byte
	var hdr http.Header
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		hdr = r.Header.Clone()
	})
	rn := newRunner(t, withHookEnv)
	n := notification(rc.URL, slidingDeadline{time.Minute})
	n.Item = testItem
	if err := rn.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		HeaderIdempotencyKey: "prod-eu/invoice-sweep/eu-west/2026-11-29T11:30:00Z/failure",
		HeaderItem:           "3", HeaderItems: "8", HeaderItemName: "eu-west",
	} {
		if got := hdr.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if got, want := string(b["item"]), `{"index":3,"items":8,"name":"eu-west"}`; got != want {
		t.Errorf("body's item %s, want %s", got, want)
	}
	if got, want := string(b["history"]), `"/api/v1/jobs/invoice-sweep/runs?item=eu-west"`; got != want {
		t.Errorf("body's history %s, want the item's runs, %s", got, want)
	}
	if NotificationKey("c", "j", "", testTick, config.NotifyFailure) != "c/j/2026-11-29T11:30:00Z/failure" {
		t.Error("a plain job's key changed")
	}
}
