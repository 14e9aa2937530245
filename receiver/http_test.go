package receiver

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// send posts a run to url with the identity headers of d.
func send(t *testing.T, url string, d Delivery) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job != "" {
		req.Header.Set(HeaderCluster, d.Cluster)
		req.Header.Set(HeaderJob, d.Job)
		req.Header.Set(HeaderTick, d.Tick.Format(time.RFC3339Nano))
		req.Header.Set(HeaderShard, strconv.Itoa(d.Shard))
		req.Header.Set(HeaderFencingToken, strconv.FormatInt(d.Token, 10))
		req.Header.Set(HeaderNode, "n1")
		if d.Item != "" {
			req.Header.Set(HeaderItemName, d.Item)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}

// The middleware over a real server: the handler runs once per key, a
// repeat gets 200 (or the replayed status), a stale token 409, a request
// without identity 400; a failed handler lets the next delivery through;
// the handler sees the delivery; the observer sees every verdict.
func TestMiddleware(t *testing.T) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	fail := atomic.Bool{}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if d, ok := FromContext(r.Context()); !ok || d.Job == "" {
			t.Errorf("handler without its delivery: %+v", d)
		}
		if fail.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	var mu sync.Mutex
	seen := map[Verdict]int{}
	obs := WithObserver(func(_ *http.Request, tk Ticket) {
		mu.Lock()
		seen[tk.Verdict]++
		mu.Unlock()
	})
	srv := httptest.NewServer(Middleware(m, next, WithReplay(), obs))
	defer srv.Close()

	a := del("c", "a", 3, 10)
	steps := []struct {
		d     Delivery
		fail  bool
		code  int
		calls int32
	}{
		{a, true, http.StatusInternalServerError, 1}, // failed: forgotten
		{a, false, http.StatusCreated, 2},            // applied
		{a, false, http.StatusCreated, 2},            // a repeat replays 201
		{del("c", "b", 3, 9), false, http.StatusConflict, 2},
		{Delivery{}, false, http.StatusBadRequest, 2},
	}
	for i, s := range steps {
		fail.Store(s.fail)
		if resp := send(t, srv.URL, s.d); resp.StatusCode != s.code || calls.Load() != s.calls {
			t.Errorf("step %d: %d after %d calls, want %d after %d", i, resp.StatusCode, calls.Load(), s.code, s.calls)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[Accept] != 2 || seen[Repeat] != 1 || seen[Stale] != 1 {
		t.Errorf("observed %v", seen)
	}
}

// Two concurrent deliveries of one key reach the handler once: the other
// is told to try later while the first runs, and gets 200 after.
func TestMiddlewareConcurrent(t *testing.T) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		close(entered)
		<-release
	})
	srv := httptest.NewServer(Middleware(m, next))
	defer srv.Close()
	a := del("c", "a", 0, 1)
	first := make(chan int)
	go func() { first <- send(t, srv.URL, a).StatusCode }()
	<-entered
	resp := send(t, srv.URL, a)
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Errorf("while the first runs: %d, Retry-After %q; want 409 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("first: %d", code)
	}
	if code := send(t, srv.URL, a).StatusCode; code != http.StatusOK || calls.Load() != 1 {
		t.Errorf("after: %d with %d calls, want 200 with 1", code, calls.Load())
	}
}

// A panicking handler forgets the key, so a later delivery applies it.
func TestMiddlewarePanic(t *testing.T) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	panicked := false
	h := Middleware(m, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if !panicked {
			panicked = true
			panic(http.ErrAbortHandler)
		}
	}))
	a := del("", "a", 0, 1)
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Header.Set(HeaderJob, a.Job)
	req.Header.Set(HeaderTick, a.Tick.Format(time.RFC3339))
	req.Header.Set(HeaderShard, "0")
	req.Header.Set(HeaderFencingToken, "1")
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	admit(t, m, a, Accept)
}
