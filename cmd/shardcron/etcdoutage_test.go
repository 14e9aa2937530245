package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

const (
	outageTTL    = 3 * time.Second
	outageShards = 16
	outageJobs   = 6
	// outageSlack is added to protocol bounds: a run sent just before the
	// safe deadline still reaches the sink, and a 2-core machine under the
	// race detector answers slowly.
	outageSlack = time.Second
)

// outageGet is a GET that must answer within d, whatever etcd does.
func outageGet(t *testing.T, addr, path string, d time.Duration) (int, string) {
	t.Helper()
	c := http.Client{Timeout: d}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type outageState struct {
	Stale      bool      `json:"stale"`
	AsOf       time.Time `json:"as_of"`
	StaleForMs int64     `json:"stale_for_ms"`
	Shards     []struct {
		Owner string `json:"owner"`
	} `json:"shards"`
}

type outageJobsPage struct {
	Stale      bool      `json:"stale"`
	AsOf       time.Time `json:"as_of"`
	StaleForMs int64     `json:"stale_for_ms"`
	Jobs       []struct {
		Name     string            `json:"name"`
		LastRuns []json.RawMessage `json:"last_runs"`
	} `json:"jobs"`
}

// TestEtcdUnavailableServesAStaleView: with etcd paused (it holds its
// connections and answers nothing) and then stopped, replicas stop acting
// within the TTL, keep serving the page, /api/v1/state and /api/v1/jobs
// from their last view marked stale with its age, and recover without a
// restart when etcd is back.
func TestEtcdUnavailableServesAStaleView(t *testing.T) {
	etcd := etcdtest.StartProcess(t)
	snk := newSink(slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(snk)
	t.Cleanup(srv.Close)
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range outageJobs {
		fmt.Fprintf(&b, "  - name: out-%d\n    schedule: \"* * * * * *\"\n    http: {url: %q}\n    timeout: 5s\n", i, srv.URL+"/fire")
	}
	jobs := writeFile(t, "jobs.yaml", b.String())
	probe := newOwnershipProbe(t, etcd.Endpoint(), "outage")
	procs := map[string]*proc{}
	addrs := map[string]string{}
	for _, n := range []string{"n1", "n2"} {
		procs[n] = startProc(t, n, "server", "--cluster", "outage", "--node-id", n,
			"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--jobs", jobs,
			"--lease-ttl", outageTTL.String(), "--shards", fmt.Sprint(outageShards), "--drain-timeout", "1s")
		addrs[n] = procs[n].HTTPAddr(30 * time.Second)
	}
	poll.MustEvery(t, procEvery, 60*time.Second, "both own the shards", poll.True(func() bool { return probe.allOwnedBy(outageShards, "n1", "n2") }))
	firingSince := func(since time.Time) bool {
		fired := map[string]bool{}
		for _, f := range snk.Fires() {
			if f.Accepted && f.At.After(since) {
				fired[f.Job] = true
			}
		}
		return len(fired) == outageJobs
	}
	start := time.Now()
	poll.MustEvery(t, procEvery, 30*time.Second, "every job firing", poll.True(func() bool { return firingSince(start) }))
	// The jobs page read while etcd answers: what a stale page falls back on.
	for n, addr := range addrs {
		poll.MustEvery(t, procEvery, 30*time.Second, n+"'s jobs page showing runs", poll.True(func() bool {
			var p outageJobsPage
			_, body := outageGet(t, addr, "/api/v1/jobs", 10*time.Second)
			if json.Unmarshal([]byte(body), &p) != nil || p.Stale || len(p.Jobs) != outageJobs {
				return false
			}
			for _, j := range p.Jobs {
				if len(j.LastRuns) == 0 {
					return false
				}
			}
			return true
		}))
	}

	for _, fault := range []struct {
		name      string
		cut, heal func()
	}{
		{"etcd paused (SIGSTOP)", etcd.Pause, etcd.Resume},
		{"etcd stopped", etcd.Stop, etcd.Restart},
	} {
		t.Logf("fault: %s", fault.name)
		fault.cut()
		cut := time.Now() // etcd answers nothing from here on (Stop returns once it exited)
		// Stale within the TTL, and served: state at once, the jobs page
		// within its bounded read.
		stale := map[string]time.Duration{}
		poll.MustEvery(t, procEvery, outageTTL+outageSlack, "both marking their view stale", poll.True(func() bool {
			for n, addr := range addrs {
				var st outageState
				code, body := outageGet(t, addr, "/api/v1/state", 5*time.Second)
				if _, done := stale[n]; !done && code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && st.Stale &&
					!st.AsOf.IsZero() && st.AsOf.Before(cut) && st.StaleForMs > 0 && len(st.Shards) == outageShards {
					stale[n] = time.Since(cut)
				}
			}
			return len(stale) == len(addrs)
		}))
		t.Logf("%s: views marked stale after %v", fault.name, stale)
		for n, addr := range addrs {
			var p outageJobsPage
			code, body := outageGet(t, addr, "/api/v1/jobs", 7*time.Second) // the replica reads for at most 2 s
			if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || !p.Stale || p.AsOf.IsZero() || !p.AsOf.Before(cut) || len(p.Jobs) != outageJobs {
				t.Fatalf("%s: jobs page with etcd away: %d %s", n, code, body)
			}
			for _, j := range p.Jobs {
				if len(j.LastRuns) == 0 {
					t.Errorf("%s: the stale jobs page lost the last runs of %s", n, j.Name)
				}
			}
			if code, page := outageGet(t, addr, "/", 5*time.Second); code != http.StatusOK || !strings.Contains(page, `id="stale"`) {
				t.Errorf("%s: the page with etcd away: %d", n, code)
			}
			if code, _ := outageGet(t, addr, "/readyz", 5*time.Second); code != http.StatusServiceUnavailable {
				t.Errorf("%s: /readyz with etcd away: %d, want 503", n, code)
			}
			if code, _ := outageGet(t, addr, "/healthz", 5*time.Second); code != http.StatusOK {
				t.Errorf("%s: /healthz with etcd away: %d", n, code)
			}
		}
		// Acting stopped within the TTL: no fire reached the sink later
		// than the TTL (plus slack) after the cut; watched for a TTL more.
		quietFrom := cut.Add(outageTTL + outageSlack)
		time.Sleep(time.Until(quietFrom.Add(outageTTL))) // the fault lasts this long; the check is below
		for _, f := range snk.Fires() {
			if f.At.After(quietFrom) {
				t.Errorf("%s: %s fired %s at %v, %v after the cut (TTL %v)", fault.name, f.Node, f.Job, f.At.Format("15:04:05.000"), f.At.Sub(cut).Round(time.Millisecond), outageTTL)
			}
		}

		healed := time.Now()
		fault.heal()
		for n, addr := range addrs {
			poll.MustEvery(t, procEvery, 60*time.Second, n+" recovered: ready, its view current", poll.True(func() bool {
				var st outageState
				code, body := outageGet(t, addr, "/api/v1/state", 5*time.Second)
				ready, _ := outageGet(t, addr, "/readyz", 5*time.Second)
				return code == http.StatusOK && json.Unmarshal([]byte(body), &st) == nil && !st.Stale && st.AsOf.After(healed) && ready == http.StatusOK
			}))
		}
		poll.MustEvery(t, procEvery, 60*time.Second, "every job firing again", poll.True(func() bool { return firingSince(healed) }))
		t.Logf("%s: every job firing again %v after etcd was back", fault.name, time.Since(healed).Round(time.Millisecond))
		poll.MustEvery(t, procEvery, 30*time.Second, "the jobs page current again", poll.True(func() bool {
			var p outageJobsPage
			_, body := outageGet(t, addrs["n2"], "/api/v1/jobs", 10*time.Second)
			return json.Unmarshal([]byte(body), &p) == nil && !p.Stale && p.AsOf.After(healed)
		}))
		for n, p := range procs {
			if p.Exited() {
				t.Fatalf("%s exited during %s: %v", n, fault.name, p.exitErr)
			}
		}
	}
}
