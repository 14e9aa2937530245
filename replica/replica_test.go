package replica

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

const waitLimit = 30 * time.Second

func listener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // Run closes it too; a second Close is harmless
	return ln
}

func get(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNewChecksConfig(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	good := Config{Cluster: "c", Node: "n", Listener: listener(t)}
	if _, err := New(cli, good); err != nil {
		t.Fatalf("New with only the required fields: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no cluster":      func(c *Config) { c.Cluster = "" },
		"bad cluster":     func(c *Config) { c.Cluster = "a/b" },
		"no node":         func(c *Config) { c.Node = "" },
		"no listener":     func(c *Config) { c.Listener = nil },
		"too many shards": func(c *Config) { c.Shards = 1 << 20 },
		"negative drain":  func(c *Config) { c.DrainTimeout = -time.Second },
		"negative runs":   func(c *Config) { c.MaxConcurrentRuns = -1 },
		"lease under 2s":  func(c *Config) { c.Lease = lease.Config{TTL: time.Second} },
	} {
		c := good
		mod(&c)
		if _, err := New(cli, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := New(nil, good); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New without a client = %v, want ErrInvalidConfig", err)
	}
}

// A replica's whole life: /healthz from the start, the job set bootstrapped,
// every shard owned, the jobs API and ReadStatus showing the job the same
// way (one read model), then a graceful leave: Run returns nil, the member
// key and every shard are gone from etcd, the listener is closed, and
// (TestMain) no goroutine is left behind.
func TestRunServesThenLeavesInOrder(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer target.Close()
	jobs, err := config.ParseJobs("jobs.yaml", []byte("jobs:\n  - {name: ping, schedule: \"* * * * * *\", timezone: UTC, http: {url: \""+target.URL+"\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ln := listener(t)
	addr := ln.Addr().String()
	listening := make(chan string, 1)
	r, err := New(cli, Config{Cluster: "life", Node: "solo", Listener: ln, Shards: 4, Jobs: jobs,
		Lease: lease.Config{TTL: 3 * time.Second}, Listening: func(a string) { listening <- a }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if got := <-listening; got != addr {
		t.Errorf("Listening(%q), want %q", got, addr)
	}
	poll.Must(t, waitLimit, "/readyz ready", poll.True(func() bool { code, _ := get(addr, "/readyz"); return code == http.StatusOK }))

	var page struct {
		Total int
		Jobs  []JobView
	}
	// A tick that fell between the apply and the shard's acquisition is
	// skipped as a misfire; a succeeded run follows.
	succeeded := func(e scheduler.Entry) bool { return e.Status == "succeeded" }
	poll.Must(t, waitLimit, "a run of ping in /api/v1/jobs", poll.True(func() bool {
		_, body := get(addr, "/api/v1/jobs")
		return json.Unmarshal([]byte(body), &page) == nil && len(page.Jobs) == 1 && slices.ContainsFunc(page.Jobs[0].LastRuns, succeeded)
	}))
	api := page.Jobs[0]
	if page.Total != 1 || api.Name != "ping" || api.Owner != "solo" || api.Token == 0 || api.Schedule != "* * * * * *" ||
		api.Timezone != "UTC" || api.Next.IsZero() {
		t.Errorf("jobs API row = %+v", api)
	}
	st, err := ReadStatus(ctx, cli, "life", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.JobsTotal != 1 || len(st.Members) != 1 || st.Members[0].Owned != 4 || st.Unowned != 0 {
		t.Fatalf("status = %+v", st)
	}
	if s := st.Jobs[0]; s.Name != api.Name || s.Shard != api.Shard || s.Owner != api.Owner || s.Token != api.Token ||
		s.Schedule != api.Schedule || s.Timezone != api.Timezone || len(s.LastRuns) != 1 || s.Next.IsZero() {
		t.Errorf("status row %+v differs from the API's %+v", s, api)
	}
	if h, err := control.History(ctx, cli, r.ks, control.EtcdLocator(cli, r.ks), "ping", "", 1); err != nil || len(h.Runs) != 1 || h.Runs[0].Status != "succeeded" {
		t.Errorf("control.History = %+v, %v", h, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return after cancel")
	}
	left, err := shard.ReadState(context.Background(), cli, r.ks)
	if err != nil || len(left.Members) != 0 || left.Unowned != 4 {
		t.Errorf("after leaving: %+v, %v; want no member and every shard free", left, err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the HTTP listener still accepts after Run returned")
	}
	if err := r.Run(context.Background()); !errors.Is(err, ErrRunTwice) {
		t.Errorf("second Run = %v, want ErrRunTwice", err)
	}
}

// Before etcd answers, /healthz says alive and every other path says not
// ready; cancelling then still returns, with every goroutine joined.
func TestHealthzBeforeEtcd(t *testing.T) {
	closed, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.NewClient(t, "http://"+closed)
	ln := listener(t)
	r, err := New(cli, Config{Cluster: "noetcd", Node: "solo", Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	addr := ln.Addr().String()
	poll.Must(t, waitLimit, "/healthz ok while etcd is away", poll.True(func() bool { code, body := get(addr, "/healthz"); return code == 200 && body == "ok\n" }))
	for _, path := range []string{"/readyz", "/api/v1/jobs", "/"} {
		if code, _ := get(addr, path); code != http.StatusServiceUnavailable {
			t.Errorf("%s while etcd is away: %d, want 503", path, code)
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run cancelled while waiting for etcd = %v, want context.Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return after cancel")
	}
}
