package runner

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// redirectJob is an http job to url that follows redirects as follow says.
func redirectJob(url string, follow config.Redirects) config.Job {
	j := httpJob(url)
	j.HTTP.FollowRedirects = follow
	return j
}

// otherHost is rc's URL under another host name (localhost for 127.0.0.1):
// the same server, another host to the client.
func otherHost(rc *receiver) string { return strings.Replace(rc.URL, "127.0.0.1", "localhost", 1) }

// TestRedirectSendsNoReferer: Go sends the previous URL, query and all, as
// Referer on a redirect; a secret in the query (?api_key=) would reach the
// next hop and its logs.
func TestRedirectSendsNoReferer(t *testing.T) {
	const secret = "referer-secret-marker-9c1"
	t.Setenv("SHARDCRON_JOB_API_KEY", secret)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/next", http.StatusFound)
		}
	})
	rn := newRunner(t, nil)
	res := rn.Run(context.Background(), testRun(httpJob(rc.URL+"/start?api_key=${SHARDCRON_JOB_API_KEY}"), slidingDeadline{time.Minute}))
	reqs, dumps := rc.requests()
	if res.Status != scheduler.StatusSucceeded || len(reqs) != 2 {
		t.Fatalf("%s (%s) after %d requests, want the same-host redirect followed", res.Status, res.Detail, len(reqs))
	}
	if ref := reqs[1].Header.Get("Referer"); ref != "" || strings.Contains(dumps[1], secret) {
		t.Errorf("the redirected request carried Referer %q:\n%s", ref, dumps[1])
	}
}

// TestRedirectToAnotherHost: by default a redirect to another host is not
// followed; with follow_redirects: any it is, without the job's headers and
// body (a 307 would resend both), but with the run's identity.
func TestRedirectToAnotherHost(t *testing.T) {
	const secret = "hdr-body-secret-marker-4f7"
	t.Setenv("SHARDCRON_JOB_API_KEY", secret)
	target := newReceiver(t, nil)
	front := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherHost(target)+"/moved", http.StatusTemporaryRedirect)
	})
	rn := newRunner(t, nil)
	job := func(follow config.Redirects) config.Job {
		j := redirectJob(front.URL+"/start", follow)
		j.HTTP.Headers = map[string]string{"X-Api-Key": "${SHARDCRON_JOB_API_KEY}", "Content-Type": "text/plain"}
		j.HTTP.Body = "token=${SHARDCRON_JOB_API_KEY}"
		return j
	}
	for _, follow := range []config.Redirects{"", config.RedirectsSameHost, config.RedirectsNone} {
		res := rn.Run(context.Background(), testRun(job(follow), slidingDeadline{time.Minute}))
		if reqs, _ := target.requests(); len(reqs) != 0 || res.Status != scheduler.StatusFailed {
			t.Fatalf("follow_redirects %q: %s (%s); %d requests reached the other host", follow, res.Status, res.Detail, len(reqs))
		}
		if strings.Contains(res.Detail, secret) {
			t.Errorf("follow_redirects %q: detail %q holds the secret", follow, res.Detail)
		}
	}
	res := rn.Run(context.Background(), testRun(job(config.RedirectsAny), slidingDeadline{time.Minute}))
	reqs, dumps := target.requests()
	if res.Status != scheduler.StatusSucceeded || len(reqs) != 1 {
		t.Fatalf("follow_redirects any: %s (%s), %d requests at the other host", res.Status, res.Detail, len(reqs))
	}
	if strings.Contains(dumps[0], secret) || reqs[0].Header.Get("X-Api-Key") != "" || reqs[0].Header.Get(HeaderJob) != "invoice-sweep" {
		t.Errorf("the other host got the job's secret header or body, or no identity:\n%s", dumps[0])
	}
}

// TestRedirectNeverDowngrades: a redirect from https to http is refused
// whatever follow_redirects says.
func TestRedirectNeverDowngrades(t *testing.T) {
	plain := newReceiver(t, nil)
	tlsFront := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/plain", http.StatusFound)
	}))
	defer tlsFront.Close()
	rn := newRunner(t, nil)
	rn.tr.TLSClientConfig = tlsFront.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	res := rn.Run(context.Background(), testRun(redirectJob(tlsFront.URL+"/start", config.RedirectsAny), slidingDeadline{time.Minute}))
	if reqs, _ := plain.requests(); len(reqs) != 0 || res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, "https to http") {
		t.Errorf("%s (%s); %d requests reached the http target", res.Status, res.Detail, len(reqs))
	}
}

// TestRedirectErrorsRedactSecrets: an error names the URL it failed on,
// which after a redirect is the Location the target chose, and it may
// repeat the job's secret in any encoding. No form of the secret reaches a
// run's detail.
func TestRedirectErrorsRedactSecrets(t *testing.T) {
	const secret = "k3y/+=marker-7d"
	t.Setenv("SHARDCRON_JOB_API_KEY", secret)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // refuses connections now
	front := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		// Echo the key back in the path and the query of a redirect to a
		// port that refuses connections (same host) and to another host.
		key := secret
		loc := "http://" + closed + "/leak/" + url.PathEscape(key) + "?k=" + url.QueryEscape(key)
		if r.URL.Path == "/away" {
			loc = "http://localhost:1/leak/" + url.PathEscape(key)
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
	})
	rn := newRunner(t, nil)
	forms := []string{secret, url.PathEscape(secret), url.QueryEscape(secret)}
	for _, tc := range []struct {
		path   string
		follow config.Redirects
	}{{"/near", config.RedirectsAny}, {"/away", config.RedirectsSameHost}, {"/away", config.RedirectsAny}} {
		job := redirectJob(front.URL+tc.path+"?api_key=${SHARDCRON_JOB_API_KEY}", tc.follow)
		job.Timeout = config.Duration(5 * time.Second)
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status == scheduler.StatusSucceeded || !strings.Contains(res.Detail, "${SHARDCRON_JOB_API_KEY}") {
			t.Errorf("%s %s: %s (%s), want a failure naming the reference", tc.path, tc.follow, res.Status, res.Detail)
		}
		for _, f := range forms {
			if strings.Contains(res.Detail, f) {
				t.Errorf("%s %s: detail %q holds the secret as %q", tc.path, tc.follow, res.Detail, f)
			}
		}
	}
}

// TestKeepOutputFalse: a job with keep_output: false keeps no output, of
// an http or an exec run.
func TestKeepOutputFalse(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "answer-marker") })
	rn := newRunner(t, nil)
	no := false
	for _, j := range []config.Job{httpJob(rc.URL), execJob("echo", "echo", "answer-marker")} {
		res := rn.Run(context.Background(), testRun(j, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusSucceeded || !strings.Contains(res.Output, "answer-marker") {
			t.Fatalf("%s (%s) %q: want the output kept by default", res.Status, res.Detail, res.Output)
		}
		j.KeepOutput = &no
		res = rn.Run(context.Background(), testRun(j, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusSucceeded || res.Output != "" {
			t.Errorf("keep_output false: %s (%s) %q", res.Status, res.Detail, res.Output)
		}
	}
}
