package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newTestServer(t *testing.T, ready error) *httptest.Server {
	t.Helper()
	names := []string{"a", "b", "c", "d", "e"}
	h, err := New(Config{
		State: func() any { return map[string]any{"members": []string{"n1"}} },
		Jobs: func(_ context.Context, q JobsQuery) (JobsPage, error) {
			var sel []string
			for _, n := range names {
				if strings.Contains(n, q.Search) {
					sel = append(sel, n)
				}
			}
			end := min(q.Offset+q.Limit, len(sel))
			return JobsPage{Jobs: sel[min(q.Offset, end):end], Total: len(sel)}, nil
		},
		Ready:   func() error { return ready },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "m 1\n") }),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	srv := newTestServer(t, nil)
	for path, want := range map[string]string{
		"/healthz":       "ok",
		"/readyz":        "ready",
		"/api/v1/state":  `"n1"`,
		"/metrics":       "m 1",
		"/":              "/api/v1/state",
		"/api/v1/jobs":   `"total": 5`,
		"/no-such-thing": "404",
	} {
		code, body := get(t, srv.URL+path)
		if want == "404" {
			if code != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", path, code)
			}
			continue
		}
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %q, want 200 containing %q", path, code, body, want)
		}
	}
}

func TestReadyzReportsTheReason(t *testing.T) {
	srv := newTestServer(t, errors.New("lease lost"))
	code, body := get(t, srv.URL+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "lease lost") {
		t.Fatalf("GET /readyz = %d %q", code, body)
	}
	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz = %d while not ready; liveness must not depend on readiness", code)
	}
}

func TestJobsPaging(t *testing.T) {
	srv := newTestServer(t, nil)
	code, body := get(t, srv.URL+"/api/v1/jobs?offset=3&limit=10")
	var page struct {
		Offset, Limit, Total int
		Jobs                 []string
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != http.StatusOK {
		t.Fatalf("GET jobs page = %d %q: %v", code, body, err)
	}
	if page.Total != 5 || strings.Join(page.Jobs, ",") != "d,e" {
		t.Fatalf("page = %+v, want total 5 and jobs d,e", page)
	}
	if code, body := get(t, srv.URL+"/api/v1/jobs?q=c"); code != http.StatusOK || !strings.Contains(body, `"total": 1`) {
		t.Errorf("GET jobs?q=c = %d %q, want the one job named with c", code, body)
	}
	for _, q := range []string{"offset=-1", "limit=0", "limit=501", "offset=x", "shard=-2", "shard=x"} {
		if code, _ := get(t, srv.URL+"/api/v1/jobs?"+q); code != http.StatusBadRequest {
			t.Errorf("GET jobs?%s = %d, want 400", q, code)
		}
	}
}

// TestPageIsLive: / is the dashboard, not a list of links: it reads the
// state API, follows the event stream, reads the jobs API a page at a
// time, and draws the shard map; it loads nothing from elsewhere.
func TestPageIsLive(t *testing.T) {
	srv := newTestServer(t, nil)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q, want text/html", ct)
	}
	for _, want := range []string{`getJSON("/api/v1/state")`, `"/api/v1/jobs?limit="`, `new EventSource("/api/v1/events")`, `id="grid"`, "without an owner"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, external := range []string{"http://", "https://", "src=\"//", "@import"} {
		if strings.Contains(body, external) {
			t.Errorf("the page refers to %q: it must be self-contained", external)
		}
	}
}
