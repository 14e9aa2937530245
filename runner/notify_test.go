package runner

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// notification is a failure notification of invoice-sweep to url.
func notification(url string, d scheduler.Deadline) scheduler.Notification {
	j := httpJob("http://billing.internal/")
	j.Notify = &config.Notify{On: config.DefaultNotifyOn, After: 3, Webhook: &config.Webhook{
		URL:     url + "/hook?k=${SHARDCRON_JOB_HOOK_KEY}",
		Headers: map[string]string{"Authorization": "Bearer ${SHARDCRON_JOB_HOOK_KEY}", "Shardcron-Job": "forged"},
		Secret:  "${SHARDCRON_JOB_HOOK_SECRET}",
	}}
	return scheduler.Notification{Cluster: "prod-eu", Node: "node-7", Job: j, Tick: testTick,
		Kind: config.NotifyFailure, Status: scheduler.StatusFailed, Detail: "HTTP 500", Attempts: 2,
		Failures: 3, Shard: 517, Token: 90210, Deadline: d}
}

var hookEnv = map[string]string{"SHARDCRON_JOB_HOOK_KEY": "k3y-value", "SHARDCRON_JOB_HOOK_SECRET": "s3cret-value"}

func withHookEnv(c *Config) {
	c.Env = func(k string) (string, bool) { v, ok := hookEnv[k]; return v, ok }
}

// verify checks a Shardcron-Signature as docs/notifications.md tells a
// receiver to, independently of Sign.
func verify(t *testing.T, header, secret string, body []byte) {
	t.Helper()
	ts, mac, ok := strings.Cut(header, ",v1=")
	ts, ok2 := strings.CutPrefix(ts, "t=")
	if !ok || !ok2 {
		t.Fatalf("signature %q malformed", header)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		t.Fatalf("signature timestamp %q", ts)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	if want := hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(mac), []byte(want)) {
		t.Fatalf("signature %q does not verify", header)
	}
}

func TestNotifySignedWithIdentityAndKey(t *testing.T) {
	var body []byte
	var hdr http.Header
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		hdr = r.Header.Clone()
	})
	rn := newRunner(t, withHookEnv)
	if err := rn.Notify(context.Background(), notification(rc.URL, slidingDeadline{time.Minute})); err != nil {
		t.Fatal(err)
	}
	verify(t, hdr.Get(HeaderSignature), "s3cret-value", body)
	for k, want := range map[string]string{
		HeaderJob: "invoice-sweep", HeaderCluster: "prod-eu", HeaderTick: "2026-11-29T11:30:00Z",
		HeaderFencingToken: "90210", HeaderShard: "517", HeaderNode: "node-7", HeaderNotification: "failure",
		HeaderIdempotencyKey: "prod-eu/invoice-sweep/2026-11-29T11:30:00Z/failure",
		"Authorization":      "Bearer k3y-value", "Content-Type": "application/json", HeaderRerun: "",
	} {
		if got := hdr.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	var b NotificationBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	want := NotificationBody{Cluster: "prod-eu", Job: "invoice-sweep", Tick: "2026-11-29T11:30:00Z", Kind: "failure",
		Status: "failed", Attempts: 2, Detail: "HTTP 500", ConsecutiveFailures: 3, Node: "node-7", Shard: 517,
		Token: 90210, History: "/api/v1/jobs/invoice-sweep/runs"}
	if b != want {
		t.Errorf("body %+v, want %+v", b, want)
	}
}

// A 503 is tried again; a re-send by a new owner is marked and keeps the
// key; no secret appears in an error.
func TestNotifyRetriesAndRedacts(t *testing.T) {
	n := 0
	var keys, reruns []string
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		keys = append(keys, r.Header.Get(HeaderIdempotencyKey))
		reruns = append(reruns, r.Header.Get(HeaderRerun))
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	rn := newRunner(t, withHookEnv)
	nt := notification(rc.URL, slidingDeadline{time.Minute})
	nt.Rerun = true
	if err := rn.Notify(context.Background(), nt); err != nil {
		t.Fatal(err)
	}
	if n != 2 || keys[0] != keys[1] || reruns[1] != "true" {
		t.Errorf("%d requests, keys %v, rerun %v", n, keys, reruns)
	}
	nt.Job.Notify.Webhook.URL = "http://127.0.0.1:1/${SHARDCRON_JOB_HOOK_KEY}"
	err := rn.Notify(context.Background(), nt)
	if err == nil || strings.Contains(err.Error(), "k3y-value") {
		t.Errorf("error %v: want one, without the secret", err)
	}
}

// Past the safe deadline nothing is sent.
func TestNotifyNotSentPastDeadline(t *testing.T) {
	rc := newReceiver(t, nil)
	rn := newRunner(t, withHookEnv)
	if err := rn.Notify(context.Background(), notification(rc.URL, passedDeadline{})); err == nil {
		t.Error("sent past the deadline")
	}
	if reqs, _ := rc.requests(); len(reqs) != 0 {
		t.Errorf("%d requests past the deadline", len(reqs))
	}
}
