package runner

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// Following a redirect sends another request: the safe deadline is read
// right before it, like before the first one, not left to the deadline
// watch (which looks only every ExtendEvery).
func TestHTTPRedirectCheckedAgainstDeadline(t *testing.T) {
	target := newReceiver(t, nil)
	d := &switchDeadline{}
	front := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		d.passed.Store(true) // the safe deadline passes while the first request is served
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	rn := newRunner(t, func(c *Config) { c.ExtendEvery = 250 * time.Millisecond })
	res := rn.Run(context.Background(), testRun(httpJob(front.URL+"/sweep"), d))
	if reqs, _ := target.requests(); len(reqs) != 0 {
		t.Fatalf("redirect followed after the safe deadline: %d requests reached the target", len(reqs))
	}
	if res.Status == scheduler.StatusSucceeded {
		t.Errorf("status %s (%s)", res.Status, res.Detail)
	}
	if testing.Verbose() {
		t.Logf("after deadline: %s (%s)", res.Status, res.Detail)
	}
	// Before the deadline, redirects are still followed.
	ok := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	res = rn.Run(context.Background(), testRun(httpJob(ok.URL+"/sweep"), slidingDeadline{time.Minute}))
	if reqs, _ := target.requests(); len(reqs) != 1 || res.Status != scheduler.StatusSucceeded {
		t.Errorf("redirect inside the deadline: %d requests, status %s (%s)", len(reqs), res.Status, res.Detail)
	}
}

// switchDeadline has a minute left until passed is set.
type switchDeadline struct{ passed atomic.Bool }

func (d *switchDeadline) Remaining() time.Duration {
	if d.passed.Load() {
		return 0
	}
	return time.Minute
}
