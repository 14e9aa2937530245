package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// jobServer serves one job, "sweep"; "away" exists but cannot be read.
func jobServer(t *testing.T, traceURL string) *httptest.Server {
	t.Helper()
	h, err := New(Config{
		State: func() any { return nil },
		Jobs:  func(context.Context, JobsQuery) (JobsPage, error) { return JobsPage{}, nil },
		Ready: func() error { return nil },
		Job: func(_ context.Context, job string, q JobQuery) (any, bool, error) {
			switch job {
			case "sweep":
				return map[string]any{"name": job, "query": q}, true, nil
			case "away":
				return nil, true, errors.New("etcd is away")
			}
			return nil, false, nil
		},
		JobKnown: func(job string) bool { return job == "sweep" || job == "away" },
		TraceURL: traceURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestJobEndpoint(t *testing.T) {
	srv := jobServer(t, "")
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/api/v1/jobs/sweep": {http.StatusOK, `"name": "sweep"`},
		// The items page: off, and the jobs API's bounds, by default.
		"/api/v1/jobs/sweep?":                            {http.StatusOK, `"Items": false,` + "\n    \"Offset\": 0,\n    \"Limit\": 50"},
		"/api/v1/jobs/sweep?items=true&offset=7&limit=3": {http.StatusOK, `"Items": true,` + "\n    \"Offset\": 7,\n    \"Limit\": 3"},
		"/api/v1/jobs/sweep?items=yes":                   {http.StatusBadRequest, `items \"yes\": want true or false`},
		"/api/v1/jobs/sweep?items=true&limit=501":        {http.StatusBadRequest, `limit \"501\": want 1 to 500`},
		"/api/v1/jobs/sweep?items=true&offset=-1":        {http.StatusBadRequest, `offset \"-1\"`},
		"/api/v1/jobs/absent":                            {http.StatusNotFound, `no job \"absent\"`},
		"/api/v1/jobs/away":                              {http.StatusServiceUnavailable, "etcd is away"},
	} {
		code, body := get(t, srv.URL+path)
		if code != want.code || !strings.Contains(body, want.body) {
			t.Errorf("GET %s = %d %s, want %d containing %s", path, code, body, want.code, want.body)
		}
	}
}

// TestJobPage: the page of a job that exists (readable or not), 404
// otherwise; the server puts in the name and the trace UI template,
// escaped; the operator controls start hidden (the page shows them once a
// token is typed in).
func TestJobPage(t *testing.T) {
	const trace = `https://traces.example/t/{trace_id}?a=1&b="x"`
	srv := jobServer(t, trace)
	for path, code := range map[string]int{"/jobs/sweep": 200, "/jobs/away": 200, "/jobs/absent": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, code)
		}
		if code == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: no content security policy", path)
		}
	}
	_, body := get(t, srv.URL+"/jobs/sweep")
	for _, want := range []string{
		`<title>sweep · shardcron</title>`,
		`data-job="sweep"`,
		`data-trace="https://traces.example/t/{trace_id}?a=1&amp;b=&#34;x&#34;"`,
		`<div id="controls" hidden>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if _, body := get(t, jobServer(t, "").URL+"/jobs/sweep"); !strings.Contains(body, `data-trace=""`) {
		t.Error("without a trace UI, the page still names one")
	}
}
