package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzHandler is the whole API with fakes that check what reaches them:
// every query the handlers accept is within the documented bounds.
func fuzzHandler(t *testing.T) http.Handler {
	h, err := New(Config{
		State: func() any { return map[string]any{"shards": []int{}} },
		Jobs: func(_ context.Context, q JobsQuery) (JobsPage, error) {
			if q.Offset < 0 || q.Limit < 1 || q.Limit > MaxPageSize || q.Shard < -1 || len(q.Search) > 128 {
				t.Fatalf("out-of-bounds query reached Jobs: %+v", q)
			}
			return JobsPage{Jobs: []string{q.Search}, Total: 1}, nil
		},
		Ready: func() error { return nil },
		Runs: func(_ context.Context, job, _ string, limit int) (any, bool, error) {
			if limit < 1 || limit > MaxRuns {
				t.Fatalf("out-of-bounds limit reached Runs: %d", limit)
			}
			return map[string]any{"job": job, "runs": []any{}}, job != "missing", nil // as control.History
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serve sends one GET and checks the answer: 200, 400 or 404, always JSON
// (an error is {"error": ...} naming the parameter).
func serve(t *testing.T, h http.Handler, target string) {
	r, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		return // not a request a client could send
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	switch w.Code {
	case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return // the mux cleaning a path (.., //)
	default:
		t.Fatalf("GET %q: status %d", target, w.Code)
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		return
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %q: body is no JSON object: %v\n%s", target, err, w.Body)
	}
	if w.Code == http.StatusBadRequest {
		msg, _ := body["error"].(string)
		if msg == "" || !utf8.ValidString(msg) {
			t.Fatalf("GET %q: 400 without a readable error: %s", target, w.Body)
		}
	}
}

// FuzzJobsQuery: any query string of /api/v1/jobs is answered 200 or 400
// (naming the parameter), never a panic, and only queries within bounds
// reach the jobs source. The kept corpus is testdata/fuzz/FuzzJobsQuery;
// `make fuzz` explores for a bounded time.
func FuzzJobsQuery(f *testing.F) {
	for _, s := range []string{"", "offset=0&limit=50", "limit=500&q=job&shard=3", "limit=0", "limit=501",
		"offset=-1", "shard=-2", "offset=99999999999999999999", "q=" + strings.Repeat("a", 129), "q=%ZZ", "limit=1e3&limit=2", "shard=0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		h := fuzzHandler(t)
		serve(t, h, "/api/v1/jobs?"+rawQuery)
		serve(t, h, "/api/v1/state?"+rawQuery)
	})
}

// FuzzRunsQuery: any job name and query string of
// /api/v1/jobs/{name}/runs is answered 200, 400 or 404, never a panic, and
// only limits within bounds reach the runs source. The kept corpus is
// testdata/fuzz/FuzzRunsQuery.
func FuzzRunsQuery(f *testing.F) {
	for _, s := range [][2]string{{"job-a", ""}, {"job-a", "limit=1000"}, {"missing", "limit=1"}, {"x", "limit=0"},
		{"x", "limit=1001"}, {"a%2Fb", "limit=-5"}, {"..", "limit=abc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, rawQuery string) {
		serve(t, fuzzHandler(t), "/api/v1/jobs/"+url.PathEscape(name)+"/runs?"+rawQuery)
	})
}
