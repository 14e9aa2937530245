package dashboard

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeFeed is a Feed whose changes the test publishes.
type fakeFeed struct {
	mu      sync.Mutex
	changes []any
	next    chan struct{}
}

func newFakeFeed() *fakeFeed { return &fakeFeed{next: make(chan struct{})} }

func (f *fakeFeed) feed(seq uint64) ([]any, uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes[min(int(seq), len(f.changes)):], uint64(len(f.changes)), f.next
}

func (f *fakeFeed) publish(c any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, c)
	close(f.next)
	f.next = make(chan struct{})
}

// readEvent reads the next server-sent event: its name, id and data.
func readEvent(t *testing.T, sc *bufio.Scanner) (name, id, data string) {
	t.Helper()
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && name != "":
			return name, id, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("event stream ended: %v", sc.Err())
	return
}

// The stream opens with the state, then carries each change as it is
// published, followed by a fresh state; a reconnect with Last-Event-ID
// gets only what it missed.
func TestEventStream(t *testing.T) {
	f := newFakeFeed()
	f.publish(map[string]any{"kind": "acquired", "shard": 1})
	var mu sync.Mutex
	owner := "n1"
	h, err := New(Config{
		State: func() any { mu.Lock(); defer mu.Unlock(); return map[string]string{"owner": owner} },
		Jobs:  func(context.Context, JobsQuery) (JobsPage, error) { return JobsPage{}, nil },
		Ready: func() error { return nil }, Changes: f.feed,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	if name, id, data := readEvent(t, sc); name != "changes" || id != "1" || !strings.Contains(data, `"shard":1`) {
		t.Fatalf("first event = %s %s %s, want the change kept from before", name, id, data)
	}
	if name, _, data := readEvent(t, sc); name != "state" || !strings.Contains(data, `"n1"`) {
		t.Fatalf("second event = %s %s, want the state", name, data)
	}
	mu.Lock()
	owner = "n2"
	mu.Unlock()
	start := time.Now()
	f.publish(map[string]any{"kind": "acquired", "shard": 2})
	if name, id, data := readEvent(t, sc); name != "changes" || id != "2" || !strings.Contains(data, `"shard":2`) {
		t.Fatalf("after a change: %s %s %s", name, id, data)
	}
	if name, _, data := readEvent(t, sc); name != "state" || !strings.Contains(data, `"n2"`) {
		t.Fatalf("after a change, the state: %s %s", name, data)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a change reached the stream after %v, want within a second", d)
	}

	req2, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	req2.Header.Set("Last-Event-ID", "1")
	resp2, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if name, id, data := readEvent(t, bufio.NewScanner(resp2.Body)); name != "changes" || id != "2" || strings.Contains(data, `"shard":1`) {
		t.Fatalf("resumed stream = %s %s %s, want only change 2", name, id, data)
	}
}
