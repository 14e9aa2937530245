package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/poll"
)

// TestNoSecretLeaks plants marker secrets everywhere a secret enters
// shardcron — a job's header value and URL query (${SHARDCRON_JOB_*}
// references, expanded on the replica), a variable of the server's
// environment (which an exec job printing its environment must not see),
// the etcd password (from a file), the HTTP API tokens, a key a target
// repeats in a redirect — and reads every
// output: the server's log (at debug level), every API answer, the page,
// /metrics, export, status (table and JSON), and the errors of failed runs
// and refused commands. The markers must reach the job targets and nowhere
// else.
func TestNoSecretLeaks(t *testing.T) {
	besideOthers(t)
	secrets := map[string]string{
		"header":   "hdr-secret-marker-a1b2c3",
		"url":      "url-secret-marker-d4e5f6",
		"execenv":  "env-secret-marker-g7h8i9",
		"readtok":  "read-token-marker-j0k1l2m3n4",
		"optok":    "operate-token-marker-o5p6q7r8",
		"wrongtok": "wrong-token-marker-s9t0u1v2",
		"redirect": "redirect-secret-marker/+w3x4",
	}
	etcd, certs, etcdPassword := secureEtcd(t)
	secrets["etcd"] = etcdPassword

	// The target of the http job records what it received: the header
	// secret must arrive there (so it was expanded, not dropped).
	var mu sync.Mutex
	var received []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer sink.Close()
	closed, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// A target that redirects and repeats the key it got, in the path and
	// (escaped) in the query, to an address that refuses connections: the
	// run's error names that URL.
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.RawQuery, "key=") // as sent
		w.Header().Set("Location", "http://"+closed+"/leak/"+key+"?again="+url.QueryEscape(key))
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	pwFile := writeFile(t, "etcd-password", etcdPassword+"\n")
	env := []string{
		"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=planted",
		"SHARDCRON_ETCD_CACERT=" + certs.CA, "SHARDCRON_ETCD_CERT=" + certs.ClientCert, "SHARDCRON_ETCD_KEY=" + certs.ClientKey,
		"SHARDCRON_ETCD_USERNAME=shardcron", "SHARDCRON_ETCD_PASSWORD_FILE=" + pwFile,
	}
	jobs := writeFile(t, "jobs.yaml", `jobs:
  - name: with-header
    schedule: "* * * * * *"
    http: {url: "`+sink.URL+`/hook", headers: {Authorization: "Bearer ${SHARDCRON_JOB_HDR}"}}
  - name: with-url-key
    schedule: "* * * * * *"
    http: {url: "http://`+closed+`/x?key=${SHARDCRON_JOB_URLKEY}"}
  - name: redirected
    schedule: "* * * * * *"
    http: {url: "`+redirector.URL+`/start?key=${SHARDCRON_JOB_REDIR}", follow_redirects: any, headers: {X-Key: "${SHARDCRON_JOB_REDIR}"}}
  - name: prints-env
    schedule: "* * * * * *"
    exec: {command: ["env"]}
`)
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	readToks := writeFile(t, "read-tokens", secrets["readtok"]+"\n")
	opToks := writeFile(t, "operate-tokens", secrets["optok"]+"\n")
	srv := startProcEnv(t, "server", []string{
		"SHARDCRON_JOB_HDR=" + secrets["header"], "SHARDCRON_JOB_URLKEY=" + secrets["url"], "SHARDCRON_JOB_EXECENV=" + secrets["execenv"],
		"SHARDCRON_JOB_REDIR=" + secrets["redirect"],
	}, "server", "--cluster", "planted", "--node-id", "solo", "--http-addr", "127.0.0.1:0", "--lease-ttl", "3s", "--shards", "4",
		"--etcd-endpoints", etcd.Endpoint(), "--etcd-cacert", certs.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey,
		"--etcd-username", "shardcron", "--etcd-password-file", pwFile,
		"--http-read-tokens-file", readToks, "--http-operate-tokens-file", opToks, "--http-open", "none")
	addr := srv.HTTPAddr(30 * time.Second)
	get := func(path, token string) string {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var outputs = map[string]string{}
	poll.MustEvery(t, procEvery, 60*time.Second, "every job has run: the header reached its target, the URL and redirected jobs failed, the exec job succeeded", poll.True(func() bool {
		mu.Lock()
		gotHeader := len(received) > 0 && received[0] == "Bearer "+secrets["header"]
		mu.Unlock()
		status, _, _ := runCLI(t, env, "status", "-o", "json")
		outputs["status json"] = status
		return gotHeader && strings.Contains(status, `"name": "with-url-key"`) &&
			strings.Count(status, `"status": "failed"`) >= 2 && strings.Count(status, `"status": "succeeded"`) >= 2
	}))
	outputs["status table"], _, _ = runCLI(t, env, "status")
	var stderr string
	outputs["history redirected"], stderr, _ = runCLI(t, env, "history", "redirected", "-o", "json")
	outputs["history redirected"] += stderr
	outputs["export"], _, _ = runCLI(t, env, "export")
	for _, p := range []string{"/", "/api/v1/state", "/api/v1/jobs", "/metrics", "/healthz", "/readyz"} {
		outputs["GET "+p] = get(p, secrets["readtok"])
	}
	outputs["GET /api/v1/state with a wrong token"] = get("/api/v1/state", secrets["wrongtok"])
	wrongPw := writeFile(t, "wrong", "wrong-etcd-password-marker\n")
	_, outputs["status with a wrong etcd password"], _ = runCLI(t, append(env[:len(env):len(env)], "SHARDCRON_ETCD_PASSWORD_FILE="+wrongPw), "status", "--timeout", "5s")
	_, outputs["server refusing a short token file"], _ = runCLI(t, nil, "server", "--etcd-endpoints", "http://127.0.0.1:1",
		"--http-read-tokens-file", writeFile(t, "short", "short-mk-07\n"))
	srv.signal(15)
	_, _ = srv.Wait(10 * time.Second)
	outputs["server log"] = srv.log.Tail(1 << 20)

	if !strings.Contains(outputs["history redirected"], "/leak/${SHARDCRON_JOB_REDIR}") {
		t.Errorf("the redirected job's detail does not name the redirect it failed on:\n%s", outputs["history redirected"])
	}
	if !strings.Contains(outputs["status json"], "with-url-key") || !strings.Contains(outputs["export"], "${SHARDCRON_JOB_HDR}") {
		t.Fatalf("the outputs are not what this test means to search:\n%s\n%s", outputs["status json"], outputs["export"])
	}
	for where, text := range outputs {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("the %s secret appears in %s", what, where)
			}
		}
		for _, m := range []string{"wrong-etcd-password-marker", "short-mk-07"} {
			if strings.Contains(text, m) {
				t.Errorf("%q appears in %s", m, where)
			}
		}
	}
	if t.Failed() {
		for where, text := range outputs {
			if len(text) > 4000 {
				text = text[len(text)-4000:]
			}
			t.Logf("---- %s ----\n%s", where, text)
		}
	}
}
