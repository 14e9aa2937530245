package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/scheduler"
)

// POST /api/v1/jobs/{name}/trigger maps the outcome of the trigger to a
// status: 202 written, 200 waited for, 404 no job, 409 suspended, 504
// no outcome within the wait, 400 a bad wait.
func TestTriggerEndpoint(t *testing.T) {
	var gotWait time.Duration
	var gotBy, gotItem string
	h, err := New(Config{
		State: func() any { return nil }, Ready: func() error { return nil },
		Jobs: func(context.Context, JobsQuery) (JobsPage, error) { return JobsPage{}, nil },
		Trigger: func(_ context.Context, job, item, by string, wait time.Duration) (any, error) {
			gotWait, gotBy, gotItem = wait, by, item
			res := control.TriggerResult{Triggered: control.Triggered{Job: job, ID: "abc"}}
			switch job {
			case "missing":
				return nil, fmt.Errorf("%w: no job", ErrNotFound)
			case "paused":
				return nil, fmt.Errorf("%w: paused", ErrConflict)
			case "slow":
				return res, fmt.Errorf("%w: withdrawn", ErrTimeout)
			}
			if wait > 0 {
				res.Run = &scheduler.Entry{Status: scheduler.StatusSucceeded, Trigger: "abc"}
			}
			return res, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		status int
		wait   time.Duration
	}{
		{"/api/v1/jobs/sweep/trigger", http.StatusAccepted, 0},
		{"/api/v1/jobs/sweep/trigger?wait=true", http.StatusOK, DefaultTriggerWait},
		{"/api/v1/jobs/sweep/trigger?wait=5s", http.StatusOK, 5 * time.Second},
		{"/api/v1/jobs/missing/trigger", http.StatusNotFound, 0},
		{"/api/v1/jobs/paused/trigger", http.StatusConflict, 0},
		{"/api/v1/jobs/slow/trigger?wait=1s", http.StatusGatewayTimeout, time.Second},
		{"/api/v1/jobs/sweep/trigger?wait=1h", http.StatusBadRequest, -1},
		{"/api/v1/jobs/sweep/trigger?wait=soon", http.StatusBadRequest, -1},
	} {
		gotWait = -1
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, c.path, nil)
		req.RemoteAddr = "192.0.2.7:5555"
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || gotWait != c.wait {
			t.Errorf("POST %s: %d (wait %v), want %d (wait %v): %s", c.path, rec.Code, gotWait, c.status, c.wait, rec.Body)
			continue
		}
		if c.status == http.StatusOK {
			var body control.TriggerResult
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Run == nil || body.ID != "abc" {
				t.Errorf("POST %s: body %s", c.path, rec.Body)
			}
		}
		if c.status == http.StatusGatewayTimeout {
			var body struct {
				Error   string
				Trigger control.TriggerResult
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" || body.Trigger.ID != "abc" {
				t.Errorf("POST %s: body %s", c.path, rec.Body)
			}
		}
		if c.wait >= 0 && gotBy != "api@192.0.2.7" {
			t.Errorf("by %q", gotBy)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/jobs/sweep/trigger?item=eu", nil))
	if rec.Code != http.StatusAccepted || gotItem != "eu" {
		t.Errorf("POST trigger?item=eu: %d, item %q", rec.Code, gotItem)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/jobs/sweep/trigger", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET trigger: %d, want 405", rec.Code)
	}
}
