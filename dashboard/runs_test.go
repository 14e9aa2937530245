package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRunsEndpoint(t *testing.T) {
	h, err := New(Config{
		State: func() any { return nil },
		Jobs:  func(context.Context, JobsQuery) (JobsPage, error) { return JobsPage{}, nil },
		Ready: func() error { return nil },
		Runs: func(_ context.Context, job, item string, limit int) (any, bool, error) {
			switch {
			case job != "sweep":
				return nil, false, nil
			case item == "mars":
				return nil, false, fmt.Errorf("%w: no item %q", ErrNotFound, item)
			case item == "0":
				return nil, false, fmt.Errorf("%w: no items", ErrBadRequest)
			}
			return []string{fmt.Sprintf("%s-%s-%d", job, item, limit)}, true, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for path, want := range map[string]struct {
		code int
		body string
	}{
		"/api/v1/jobs/sweep/runs":           {http.StatusOK, `"sweep--20"`},
		"/api/v1/jobs/sweep/runs?limit=3":   {http.StatusOK, `"sweep--3"`},
		"/api/v1/jobs/sweep/runs?item=eu":   {http.StatusOK, `"sweep-eu-20"`},
		"/api/v1/jobs/sweep/runs?item=mars": {http.StatusNotFound, `no item \"mars\"`},
		"/api/v1/jobs/sweep/runs?item=0":    {http.StatusBadRequest, "no items"},
		"/api/v1/jobs/sweep/runs?limit=0":   {http.StatusBadRequest, "limit"},
		"/api/v1/jobs/sweep/runs?limit=x":   {http.StatusBadRequest, "limit"},
		"/api/v1/jobs/absent/runs?limit=3":  {http.StatusNotFound, `no job \"absent\"`},
	} {
		code, body := get(t, srv.URL+path)
		if code != want.code || !strings.Contains(body, want.body) {
			t.Errorf("GET %s = %d %s, want %d containing %s", path, code, body, want.code, want.body)
		}
	}
}
