package runner

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// receiver is a real HTTP server on loopback that records what it gets.
type receiver struct {
	*httptest.Server
	conns atomic.Int32 // connections opened

	mu    sync.Mutex
	reqs  []*http.Request
	dumps []string
}

func newReceiver(t *testing.T, h http.HandlerFunc) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, r)
		rc.dumps = append(rc.dumps, string(dump))
		rc.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	rc.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() ([]*http.Request, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.reqs...), append([]string(nil), rc.dumps...)
}

func httpJob(url string) config.Job {
	return config.Job{Name: "invoice-sweep", HTTP: &config.HTTPTarget{URL: url}}
}

// The receiver sees every identity header with the run's values, the
// expanded ${SHARDCRON_JOB_*} references, and never the server's secret.
func TestHTTPIdentityHeaders(t *testing.T) {
	t.Setenv("SHARDCRON_ETCD_PASSWORD", "secret")
	t.Setenv("SHARDCRON_JOB_BILLING_TOKEN", "tok-42")
	t.Setenv("SHARDCRON_JOB_REGION", "eu")
	rc := newReceiver(t, nil)
	rn := newRunner(t, nil)
	job := httpJob(rc.URL + "/sweep?region=${SHARDCRON_JOB_REGION}")
	job.HTTP.Method = http.MethodPut
	job.HTTP.Headers = map[string]string{"Authorization": "Bearer ${SHARDCRON_JOB_BILLING_TOKEN}",
		HeaderFencingToken: "999999999", "X-Literal": "$$5 and $HOME"}
	job.HTTP.Body = `{"region":"${SHARDCRON_JOB_REGION}"}`
	r := testRun(job, slidingDeadline{time.Minute})
	r.Tick = time.Date(2026, 11, 29, 12, 30, 5, 0, time.FixedZone("CET", 3600))
	res := rn.Run(context.Background(), r)
	if res.Status != scheduler.StatusSucceeded || res.Detail != "HTTP 200 OK" {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	reqs, dumps := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0]
	want := map[string]string{
		HeaderCluster: "prod-eu", HeaderJob: "invoice-sweep", HeaderTick: "2026-11-29T11:30:05Z",
		HeaderShard: "517", HeaderFencingToken: "90210", HeaderNode: "node-7",
		"Authorization": "Bearer tok-42", "X-Literal": "$5 and $HOME",
	}
	for k, v := range want {
		if g := got.Header.Values(k); len(g) != 1 || g[0] != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	for _, h := range []string{HeaderRerun, HeaderTrigger, HeaderTriggerID, HeaderAttempt, HeaderItem, HeaderItems, HeaderItemName} {
		if _, ok := got.Header[h]; ok {
			t.Errorf("%s sent on a first attempt of a scheduled tick", h)
		}
	}
	if got.Method != http.MethodPut || got.URL.RawQuery != "region=eu" {
		t.Errorf("%s %s", got.Method, got.URL)
	}
	if !strings.HasSuffix(dumps[0], `{"region":"eu"}`) {
		t.Errorf("body not expanded: %q", dumps[0])
	}
	if strings.Contains(dumps[0], "secret") {
		t.Fatalf("the server's secret was sent:\n%s", dumps[0])
	}

	r.Rerun = true
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("rerun: status %s (%s)", res.Status, res.Detail)
	}
	if reqs, _ := rc.requests(); reqs[1].Header.Get(HeaderRerun) != "true" {
		t.Errorf("rerun: %s = %q", HeaderRerun, reqs[1].Header.Get(HeaderRerun))
	}

	// A manual tick's retry says so.
	r.Rerun, r.Trigger, r.Attempt = false, "7f3a9c", 3
	job.HTTP.Headers[HeaderTrigger] = "scheduled" // a job cannot forge it either
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("manual: status %s (%s)", res.Status, res.Detail)
	}
	reqs, _ = rc.requests()
	for h, v := range map[string]string{HeaderTrigger: "manual", HeaderTriggerID: "7f3a9c", HeaderAttempt: "3"} {
		if g := reqs[2].Header.Values(h); len(g) != 1 || g[0] != v {
			t.Errorf("manual: %s = %q, want %q", h, g, v)
		}
	}
}

// ${OTHER} (the server's own variables) and unset names fail the run, and
// nothing is sent.
func TestHTTPExpandRefusals(t *testing.T) {
	t.Setenv("SHARDCRON_ETCD_PASSWORD", "secret")
	rc := newReceiver(t, nil)
	rn := newRunner(t, nil)
	cases := []struct {
		name string
		edit func(*config.HTTPTarget)
		want string
	}{
		{"header", func(h *config.HTTPTarget) { h.Headers = map[string]string{"X-P": "${SHARDCRON_ETCD_PASSWORD}"} },
			"header X-P: config: variable not allowed: ${SHARDCRON_ETCD_PASSWORD}: only variables named SHARDCRON_JOB_*"},
		{"url", func(h *config.HTTPTarget) { h.URL += "?p=${HOME}" }, "url: config: variable not allowed: ${HOME}"},
		{"body", func(h *config.HTTPTarget) { h.Body = "${SHARDCRON_JOB_NOPE}" },
			"body: config: variable not set: ${SHARDCRON_JOB_NOPE} is not set"},
	}
	for _, c := range cases {
		job := httpJob(rc.URL)
		c.edit(job.HTTP)
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.HasPrefix(res.Detail, c.want) {
			t.Errorf("%s: status %s (%s), want failed: %s", c.name, res.Status, res.Detail, c.want)
		}
	}
	if reqs, _ := rc.requests(); len(reqs) != 0 {
		t.Fatalf("%d requests sent", len(reqs))
	}
}

func TestHTTPExpectStatus(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/302":
			w.WriteHeader(http.StatusAccepted)
		}
	})
	rn := newRunner(t, nil)
	for _, c := range []struct {
		path   string
		expect []int
		want   scheduler.Status
		detail string
	}{
		{"/500", nil, scheduler.StatusFailed, "HTTP 500 Internal Server Error"},
		{"/500", []int{500}, scheduler.StatusSucceeded, "HTTP 500 Internal Server Error"},
		{"/204", nil, scheduler.StatusSucceeded, "HTTP 204 No Content"},
		{"/302", []int{200}, scheduler.StatusFailed, "HTTP 202 Accepted"},
	} {
		job := httpJob(rc.URL + c.path)
		job.HTTP.ExpectStatus = c.expect
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status != c.want || res.Detail != c.detail {
			t.Errorf("%s %v: %s (%s), want %s (%s)", c.path, c.expect, res.Status, res.Detail, c.want, c.detail)
		}
	}
}

// The response body is kept up to the bound, with a marker; connections
// are reused across runs.
func TestHTTPResponseBoundAndReuse(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, strings.Repeat("x", 10000))
			return
		}
		_, _ = io.WriteString(w, "small")
	})
	rn := newRunner(t, func(c *Config) { c.MaxResponseBytes = 100 })
	res := rn.Run(context.Background(), testRun(httpJob(rc.URL+"/big"), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusSucceeded ||
		res.Output != strings.Repeat("x", 100)+"\n[shardcron: response truncated after 100 bytes]\n" {
		t.Fatalf("status %s (%s), output %q", res.Status, res.Detail, res.Output)
	}
	before := rc.conns.Load()
	for range 5 {
		res := rn.Run(context.Background(), testRun(httpJob(rc.URL+"/small"), slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusSucceeded || res.Output != "small" {
			t.Fatalf("status %s (%s), output %q", res.Status, res.Detail, res.Output)
		}
	}
	// The truncated response's connection may have been closed; the five
	// small ones share at most one new connection.
	if n := rc.conns.Load() - before; n > 1 {
		t.Fatalf("%d new connections for 5 runs; want them reused", n)
	}
}

func TestHTTPTimeout(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	rn := newRunner(t, nil)
	job := httpJob(rc.URL)
	job.Timeout = config.Duration(200 * time.Millisecond)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, scheduler.ErrTimeout)
	defer cancel()
	res := rn.Run(ctx, testRun(job, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusTimedOut || res.Detail != "timeout after 200ms: request abandoned" {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

// Loss of the shard abandons the request at once: the receiver sees its
// request's context end.
func TestHTTPShardLostCancelsRequest(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan time.Time, 1)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		ended <- time.Now()
	})
	rn := newRunner(t, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	resc := make(chan scheduler.Result, 1)
	go func() { resc <- rn.Run(ctx, testRun(httpJob(rc.URL), slidingDeadline{time.Minute})) }()
	<-entered
	lost := time.Now()
	cancel(scheduler.ErrShardLost)
	res := <-resc
	returned := time.Since(lost)
	var seen time.Time
	select {
	case seen = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver never saw the request cancelled")
	}
	t.Logf("loss -> Run returned: %v; loss -> request cancelled at the receiver: %v",
		returned.Round(time.Microsecond), seen.Sub(lost).Round(time.Microsecond))
	if res.Status != scheduler.StatusCancelled || res.Detail != "shard lost: request abandoned" {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

// The runner's own deadline watch abandons a request when the safe
// deadline passes, even if the scheduler's signal is late.
func TestHTTPDeadlineWatch(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	rn := newRunner(t, nil)
	d := &freezableDeadline{window: 300 * time.Millisecond}
	d.Freeze()
	res := rn.Run(context.Background(), testRun(httpJob(rc.URL), d))
	if res.Status != scheduler.StatusCancelled || res.Detail != "safe deadline passed: request abandoned" {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

// Past the safe deadline nothing is sent.
func TestHTTPDeadlinePassedNotSent(t *testing.T) {
	rc := newReceiver(t, nil)
	rn := newRunner(t, nil)
	res := rn.Run(context.Background(), testRun(httpJob(rc.URL), passedDeadline{}))
	if res.Status != scheduler.StatusCancelled || res.Detail != "safe deadline passed: request not sent" {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if reqs, _ := rc.requests(); len(reqs) != 0 {
		t.Fatalf("%d requests sent past the deadline", len(reqs))
	}
}

func TestHTTPUnreachable(t *testing.T) {
	rc := newReceiver(t, nil)
	url := rc.URL
	rc.Close()
	rn := newRunner(t, nil)
	res := rn.Run(context.Background(), testRun(httpJob(url), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || !strings.HasPrefix(res.Detail, "request: ") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

func TestHTTPClientTimeout(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	rn := newRunner(t, func(c *Config) { c.ClientTimeout = 100 * time.Millisecond })
	res := rn.Run(context.Background(), testRun(httpJob(rc.URL), slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusTimedOut || !strings.Contains(res.Detail, "Client.Timeout") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
}

// Following a redirect sends another request: the safe deadline is read
// right before it, like before the first one, not left to the deadline
// watch (which looks only every ExtendEvery).
func TestHTTPRedirectCheckedAgainstDeadline(t *testing.T) {
	target := newReceiver(t, nil)
	d := &switchDeadline{}
	front := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		d.passed.Store(true) // the safe deadline passes while the first request is served
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	rn := newRunner(t, func(c *Config) { c.ExtendEvery = 250 * time.Millisecond })
	// The target is another port: another host to follow_redirects.
	res := rn.Run(context.Background(), testRun(redirectJob(front.URL+"/sweep", config.RedirectsAny), d))
	if reqs, _ := target.requests(); len(reqs) != 0 {
		t.Fatalf("redirect followed after the safe deadline: %d requests reached the target", len(reqs))
	}
	if res.Status == scheduler.StatusSucceeded {
		t.Errorf("status %s (%s)", res.Status, res.Detail)
	}
	if testing.Verbose() {
		t.Logf("after deadline: %s (%s)", res.Status, res.Detail)
	}
	// Before the deadline, redirects are still followed.
	ok := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	res = rn.Run(context.Background(), testRun(redirectJob(ok.URL+"/sweep", config.RedirectsAny), slidingDeadline{time.Minute}))
	if reqs, _ := target.requests(); len(reqs) != 1 || res.Status != scheduler.StatusSucceeded {
		t.Errorf("redirect inside the deadline: %d requests, status %s (%s)", len(reqs), res.Status, res.Detail)
	}
}

// switchDeadline has a minute left until passed is set.
type switchDeadline struct{ passed atomic.Bool }

func (d *switchDeadline) Remaining() time.Duration {
	if d.passed.Load() {
		return 0
	}
	return time.Minute
}

func (d *switchDeadline) Deadline() time.Duration {
	if d.passed.Load() {
		return 0
	}
	return time.Duration(boottime()) + time.Minute
}
