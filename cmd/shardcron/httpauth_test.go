package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestServerRefusesOpenHTTPBeyondLoopback: without token auth, server will
// not listen beyond loopback unless told --insecure-http; dev listens only
// on loopback.
func TestServerRefusesOpenHTTPBeyondLoopback(t *testing.T) {
	besideOthers(t)
	for _, args := range [][]string{
		{"server", "--etcd-endpoints", "http://127.0.0.1:1", "--http-addr", "0.0.0.0:0"},
		{"server", "--etcd-endpoints", "http://127.0.0.1:1"}, // the default :8080
	} {
		_, stderr, code := runCLI(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, "listens beyond loopback without token auth") || !strings.Contains(stderr, "--insecure-http") {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
	}
	_, stderr, code := runCLI(t, nil, "dev", "--http-addr", "0.0.0.0:0")
	if code != 2 || !strings.Contains(stderr, "dev serves only on loopback") {
		t.Errorf("dev --http-addr 0.0.0.0:0: exit %d, stderr:\n%s", code, stderr)
	}
	// etcd is unreachable: /healthz answers all the same.
	free, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(free)
	srv := startProc(t, "server", "server", "--etcd-endpoints", "http://127.0.0.1:1", "--http-addr", "0.0.0.0:"+port, "--insecure-http", "--node-id", "open")
	poll.MustEvery(t, procEvery, 20*time.Second, "--insecure-http serves /healthz", poll.True(func() bool { return httpGet(t, "127.0.0.1:"+port, "/healthz") == "ok\n" }))
	if !srv.log.Contains("without token auth beyond loopback") {
		t.Error("no warning about --insecure-http")
	}
}

// TestHTTPTLSAndTokens: a server on every interface with TLS, read and
// operate tokens from files, and only /healthz left open: reads need a
// token, every non-GET needs an operate token, refusals are counted and
// logged without the token, and plain HTTP gets no answer.
func TestHTTPTLSAndTokens(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t)
	certs := etcdtest.GenerateCerts(t)
	const readTok, operateTok = "read-tok-marker-1111111111", "operate-tok-marker-2222222222"
	readFile := writeFile(t, "read-tokens", "# dashboards\n"+readTok+"\n")
	operateFile := writeFile(t, "operate-tokens", operateTok+"\n")
	srv := startProc(t, "server", "server", "--cluster", "guarded", "--node-id", "solo", "--etcd-endpoints", etcd.Endpoint(),
		"--lease-ttl", "3s", "--shards", "4", "--http-addr", "0.0.0.0:0",
		"--http-tls-cert", certs.ServerCert, "--http-tls-key", certs.ServerKey,
		"--http-read-tokens-file", readFile, "--http-operate-tokens-file", operateFile, "--http-open", "healthz")
	_, port, err := net.SplitHostPort(srv.HTTPAddr(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:" + port
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	do := func(method, path, token string) (int, string) {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready (with a read token)", poll.True(func() bool {
		code, body := do("GET", "/readyz", readTok)
		return code == 200 && body == "ready\n"
	}))
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/", "", 401},
		{"GET", "/api/v1/state", "", 401},
		{"GET", "/api/v1/state", "not-a-token-marker-3333333", 401},
		{"GET", "/api/v1/state", readTok, 200},
		{"GET", "/api/v1/jobs", operateTok, 200},
		{"POST", "/api/v1/jobs/anything/trigger", readTok, 403},
		{"POST", "/api/v1/jobs/anything/suspend", "", 401},
		{"POST", "/api/v1/jobs/anything/resume", readTok, 403},
		{"POST", "/api/v1/jobs/anything/suspend", operateTok, 404}, // past the guard: no such job
		{"DELETE", "/api/v1/some-future-endpoint", readTok, 403},
	} {
		if code, body := do(tc.method, tc.path, tc.token); code != tc.want {
			t.Errorf("%s %s (token %q): %d %s, want %d", tc.method, tc.path, tc.token, code, body, tc.want)
		}
	}
	// An operate token passes the guard (the endpoint itself may answer
	// 404 or 405 until it exists).
	if code, body := do("POST", "/api/v1/jobs/anything/trigger", operateTok); code == 401 || code == 403 || code == 0 {
		t.Errorf("POST with an operate token: %d %s", code, body)
	}
	_, metrics := do("GET", "/metrics", readTok)
	for _, want := range []string{`shardcron_http_auth_failures_total{reason="missing"} 5`, `shardcron_http_auth_failures_total{reason="invalid"} 1`, `shardcron_http_auth_failures_total{reason="forbidden"} 3`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if resp, err := http.Get("http://127.0.0.1:" + port + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered 200 on the TLS port")
		}
	}
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Errorf("SIGTERM: exit %d, %v", code, err)
	}
	if !srv.log.Contains("http request refused") {
		t.Error("no refusal logged")
	}
	for _, secret := range []string{readTok, operateTok, "not-a-token-marker"} {
		if srv.log.Contains(secret) || strings.Contains(metrics, secret) {
			t.Errorf("a token (%s) is in the log or the metrics", secret)
		}
	}
}
