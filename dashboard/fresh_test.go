package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A page that says it is stale is served with its age beside it; a fresh
// one says so too; the page (the HTML) shows both.
func TestJobsPageFreshness(t *testing.T) {
	asOf := time.Now().Add(-7 * time.Second)
	stale := true
	h, err := New(Config{
		State: func() any { return map[string]any{} },
		Jobs: func(context.Context, JobsQuery) (JobsPage, error) {
			f := Freshness{AsOf: time.Now()}
			if stale {
				f = Freshness{Stale: true, AsOf: asOf, Reason: "etcd did not answer"}
			}
			return JobsPage{Jobs: []string{"a"}, Total: 1, Fresh: f}, nil
		},
		Ready: func() error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var got struct {
		Jobs        []string  `json:"jobs"`
		Stale       *bool     `json:"stale"`
		AsOf        time.Time `json:"as_of"`
		StaleForMs  int64     `json:"stale_for_ms"`
		StaleReason string    `json:"stale_reason"`
	}
	code, body := get(t, srv.URL+"/api/v1/jobs")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET /api/v1/jobs = %d %s", code, body)
	}
	if got.Stale == nil || !*got.Stale || !got.AsOf.Equal(asOf.UTC().Round(0)) && got.AsOf.Sub(asOf).Abs() > time.Millisecond ||
		got.StaleForMs < 7000 || got.StaleReason != "etcd did not answer" || len(got.Jobs) != 1 {
		t.Fatalf("stale page served as %s", body)
	}
	stale = false
	got.Stale, got.StaleReason, got.StaleForMs = nil, "", 0
	_, body = get(t, srv.URL+"/api/v1/jobs")
	if json.Unmarshal([]byte(body), &got) != nil || got.Stale == nil || *got.Stale || got.StaleForMs != 0 || got.StaleReason != "" || got.AsOf.IsZero() {
		t.Fatalf("fresh page served as %s", body)
	}
	_, html := get(t, srv.URL+"/")
	for _, want := range []string{`id="stale"`, "state.stale", `id="jobstale"`, "page.stale"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not show staleness: no %q", want)
		}
	}
}
