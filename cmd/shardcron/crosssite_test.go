package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// siteRequest is one request as a browser (or a script) would send it.
type siteRequest struct {
	method, path string
	// auth is the whole Authorization header ("" for none).
	auth string
	// host overrides the Host header ("" keeps the address dialled).
	host string
	// headers are Origin, Sec-Fetch-Site and the like.
	headers map[string]string
}

// send sends req to addr and returns the status and body (0 and the error
// when no answer came).
func (req siteRequest) send(t *testing.T, addr string) (int, string) {
	t.Helper()
	r, err := http.NewRequest(req.method, "http://"+addr+req.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.auth != "" {
		r.Header.Set("Authorization", req.auth)
	}
	if req.host != "" {
		r.Host = req.host
	}
	for k, v := range req.headers {
		r.Header.Set(k, v)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(r)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		// The stream never ends: its first line is enough.
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		return resp.StatusCode, line
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func basicAuth(user, pw string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pw)
	return r.Header.Get("Authorization")
}

const crossSiteJobs = "jobs:\n  - {name: guarded-job, schedule: \"@every 1h\", exec: {command: [\"true\"]}}\n"

// TestCrossSiteWritesRefused: a page on another site cannot make an
// operator's browser write. A cross-site POST is 403 even with an operate
// token; a write with Basic credentials (what a browser replays by itself
// after its login prompt) is refused; the same POST with a bearer token
// from a script or from the replica's own origin goes through; and the
// page, which reads with the browser's Basic login, still loads its state
// and event stream.
func TestCrossSiteWritesRefused(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t)
	const readTok, operateTok = "read-tok-xsite-1111111111", "operate-tok-xsite-2222222222"
	srv := startProc(t, "server", "server", "--cluster", "xsite", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--lease-ttl", "3s", "--shards", "4", "--http-addr", "127.0.0.1:0", "--jobs", writeFile(t, "jobs.yaml", crossSiteJobs),
		"--http-read-tokens-file", writeFile(t, "read", readTok+"\n"), "--http-operate-tokens-file", writeFile(t, "operate", operateTok+"\n"))
	addr := srv.HTTPAddr(30 * time.Second)
	bearer := "Bearer " + operateTok
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool {
		code, _ := siteRequest{method: "GET", path: "/readyz"}.send(t, addr)
		return code == 200
	}))
	trigger := "/api/v1/jobs/guarded-job/trigger"
	for _, tc := range []struct {
		name string
		req  siteRequest
		want int
	}{
		{"cross-site fetch with an operate token", siteRequest{method: "POST", path: trigger, auth: bearer,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}}, 403},
		{"same-site but other origin", siteRequest{method: "POST", path: "/api/v1/jobs/guarded-job/suspend", auth: bearer,
			headers: map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"}}, 403},
		{"an old browser's cross-origin form (Origin only)", siteRequest{method: "POST", path: trigger, auth: bearer,
			headers: map[string]string{"Origin": "http://evil.example"}}, 403},
		{"Basic operate credentials, as a browser replays them", siteRequest{method: "POST", path: trigger, auth: basicAuth("op", operateTok)}, 401},
		{"Basic operate credentials, same origin", siteRequest{method: "POST", path: trigger, auth: basicAuth("op", operateTok),
			headers: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + addr}}, 401},
		{"a script with a bearer token", siteRequest{method: "POST", path: trigger, auth: bearer}, 202},
		{"the replica's own origin with a bearer token", siteRequest{method: "POST", path: trigger, auth: bearer,
			headers: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + addr}}, 202},
		{"the page, logged in with Basic", siteRequest{method: "GET", path: "/", auth: basicAuth("me", readTok),
			headers: map[string]string{"Sec-Fetch-Site": "none"}}, 200},
		{"the page's state fetch", siteRequest{method: "GET", path: "/api/v1/state", auth: basicAuth("me", readTok),
			headers: map[string]string{"Sec-Fetch-Site": "same-origin"}}, 200},
		{"the page's event stream", siteRequest{method: "GET", path: "/api/v1/events", auth: basicAuth("me", readTok),
			headers: map[string]string{"Sec-Fetch-Site": "same-origin"}}, 200},
	} {
		code, body := tc.req.send(t, addr)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	if code, metrics := (siteRequest{method: "GET", path: "/metrics"}).send(t, addr); code != 200 || !strings.Contains(metrics, `shardcron_http_refused_total{reason="cross_origin"} 3`) {
		t.Errorf("/metrics does not count the 3 cross-origin writes refused:\n%s", metrics)
	}
	if !srv.log.Contains("job triggered over HTTP") {
		t.Error("the bearer-token triggers left no log line")
	}
	if srv.log.Contains("job suspend or resume over HTTP") {
		t.Error("the cross-site suspend went through")
	}
}

// TestTokenlessListenerChecksHost: a replica without tokens (make run,
// compose) answers only requests addressed to it by a loopback name or an
// IP address, so a page that rebinds its own name to 127.0.0.1 reads and
// writes nothing; the open probes answer whatever the Host.
func TestTokenlessListenerChecksHost(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t)
	srv := startProc(t, "server", "server", "--cluster", "rebind", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--lease-ttl", "3s", "--shards", "4", "--http-addr", "127.0.0.1:0", "--jobs", writeFile(t, "jobs.yaml", crossSiteJobs))
	addr := srv.HTTPAddr(30 * time.Second)
	_, port, _ := net.SplitHostPort(addr)
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool {
		code, _ := siteRequest{method: "GET", path: "/readyz"}.send(t, addr)
		return code == 200
	}))
	for _, tc := range []struct {
		method, path, host string
		want               int
	}{
		{"GET", "/api/v1/state", "evil.example", 403},
		{"GET", "/api/v1/jobs/guarded-job/runs", "evil.example:" + port, 403},
		{"GET", "/", "rebind.evil.example:" + port, 403},
		{"POST", "/api/v1/jobs/guarded-job/trigger", "evil.example:" + port, 403},
		{"GET", "/api/v1/state", "127.0.0.1:" + port, 200},
		{"GET", "/api/v1/state", "localhost:" + port, 200},
		{"GET", "/api/v1/state", "[::1]:" + port, 200},
		{"GET", "/", "localhost", 200},
		{"GET", "/healthz", "evil.example", 200},
		{"POST", "/api/v1/jobs/guarded-job/trigger", "127.0.0.1:" + port, 202},
	} {
		code, body := siteRequest{method: tc.method, path: tc.path, host: tc.host}.send(t, addr)
		if code != tc.want {
			t.Errorf("%s %s Host %s: %d %s, want %d", tc.method, tc.path, tc.host, code, body, tc.want)
		}
		if tc.want == 403 && !strings.Contains(body, "Host") {
			t.Errorf("%s %s Host %s: the refusal does not say why: %s", tc.method, tc.path, tc.host, body)
		}
	}
}
