package dashboard

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func boundedConfig(state func() any, feed Feed, trigger TriggerFunc) Config {
	return Config{
		State: state, Ready: func() error { return nil }, Changes: feed, Trigger: trigger,
		Jobs: func(context.Context, JobsQuery) (JobsPage, error) { return JobsPage{}, nil },
	}
}

// TestEventStreamsCappedAndShareOneSnapshot: MaxSubscribers streams are
// served at once and the next is refused with 503 and Retry-After; however
// many subscribe at once, the state is rendered about once, not once per
// stream; a stream that ends frees its place.
func TestEventStreamsCappedAndShareOneSnapshot(t *testing.T) {
	var renders atomic.Int64
	f := newFakeFeed()
	h, err := New(boundedConfig(func() any { renders.Add(1); return map[string]int{"shards": 4} }, f.feed, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
		return srv.Client().Do(req)
	}
	var resps []*http.Response
	defer func() {
		for _, r := range resps {
			r.Body.Close()
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range MaxSubscribers {
		wg.Go(func() {
			resp, err := open()
			if err != nil {
				t.Error(err)
				return
			}
			if name, _, _ := readEvent(t, bufio.NewScanner(resp.Body)); name != "state" || resp.StatusCode != 200 {
				t.Errorf("stream: %d %s", resp.StatusCode, name)
			}
			mu.Lock()
			resps = append(resps, resp)
			mu.Unlock()
		})
	}
	wg.Wait()
	// One rendering per snapshotEvery while they connected, at most.
	if n := renders.Load(); n > 20 {
		t.Errorf("the state was rendered %d times for %d streams", n, MaxSubscribers)
	}
	resp, err := open()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("stream %d: %d, want 503 with Retry-After", MaxSubscribers+1, resp.StatusCode)
	}
	resps[0].Body.Close()
	resps = resps[1:]
	var again *http.Response
	deadline := time.Now().Add(5 * time.Second)
	for again == nil || again.StatusCode != 200 {
		if again != nil {
			again.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's place was not freed")
		}
		if again, err = open(); err != nil {
			t.Fatal(err)
		}
	}
	resps = append(resps, again)
}

// TestStreamOutlivesServerTimeouts: behind a server whose read and write
// timeouts are far shorter than the stream, the stream keeps delivering.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	f := newFakeFeed()
	srv := shortTimeouts(t, boundedConfig(func() any { return "s" }, f.feed, nil))
	resp, err := srv.Client().Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	readEvent(t, sc)
	for i := range 3 {
		waitPast := time.NewTimer(300 * time.Millisecond) // past both timeouts
		<-waitPast.C
		f.publish(i)
		name, _, _ := readEvent(t, sc)
		if name == "state" { // the one due after the last change
			name, _, _ = readEvent(t, sc)
		}
		if name != "changes" {
			t.Fatalf("after %d timeouts' worth: %s", i+1, name)
		}
	}
}

// TestOperateBounded: MaxOperate actions at once; the next is refused with
// 503 and Retry-After rather than queued, and a finished one frees its
// place.
func TestOperateBounded(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(MaxOperate)
	h, err := New(boundedConfig(func() any { return nil }, nil, func(_ context.Context, job, _, _ string, _ time.Duration) (any, error) {
		if job == "block" {
			started.Done()
			<-release
		}
		return map[string]string{"job": job}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	post := func(job string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/jobs/"+job+"/trigger", nil))
		return rec
	}
	var wg sync.WaitGroup
	for range MaxOperate {
		wg.Go(func() {
			if rec := post("block"); rec.Code != http.StatusAccepted {
				t.Errorf("blocked trigger: %d", rec.Code)
			}
		})
	}
	started.Wait()
	if rec := post("more"); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("trigger %d: %d %s, want 503 with Retry-After", MaxOperate+1, rec.Code, rec.Body)
	}
	close(release)
	wg.Wait()
	if rec := post("more"); rec.Code != http.StatusAccepted {
		t.Errorf("after the others finished: %d", rec.Code)
	}
}

// TestWaitOutlivesServerTimeouts: a trigger's ?wait= answers after the
// outcome, behind a server whose read and write timeouts are far shorter.
func TestWaitOutlivesServerTimeouts(t *testing.T) {
	const outcomeAfter = 400 * time.Millisecond
	srv := shortTimeouts(t, boundedConfig(func() any { return nil }, nil, func(ctx context.Context, job, _, _ string, wait time.Duration) (any, error) {
		slow := time.NewTimer(outcomeAfter) // the run takes this long
		defer slow.Stop()
		select {
		case <-slow.C:
			return map[string]string{"job": job, "status": "succeeded"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	resp, err := srv.Client().Post(srv.URL+"/api/v1/jobs/slow/trigger?wait=5s", "", nil)
	if err != nil {
		t.Fatalf("?wait= past the server's timeouts: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("?wait= past the server's timeouts: %d", resp.StatusCode)
	}
}

// shortTimeouts serves cfg's handler behind a server whose read and write
// timeouts are 100 ms, closed at the end of the test.
func shortTimeouts(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
