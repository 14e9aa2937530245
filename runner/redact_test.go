package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// TestHTTPErrorKeepsURLSecret: net/http quotes the URL in its errors; a
// run's detail shows the URL as written, with its ${SHARDCRON_JOB_*}
// reference, never the expanded secret.
func TestHTTPErrorKeepsURLSecret(t *testing.T) {
	const secret = "url-key-marker-55aa"
	t.Setenv("SHARDCRON_JOB_KEY", secret)
	rc := newReceiver(t, nil)
	url := rc.URL
	rc.Close() // refuses connections now
	rn := newRunner(t, nil)
	for _, written := range []string{url + "/x?key=${SHARDCRON_JOB_KEY}", url + "/${SHARDCRON_JOB_KEY}/x"} {
		job := httpJob(written)
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.HasPrefix(res.Detail, "request: ") || strings.Contains(res.Detail, secret) || !strings.Contains(res.Detail, "${SHARDCRON_JOB_KEY}") {
			t.Errorf("%s: status %s, detail %q: want failed, naming the reference and not the secret", written, res.Status, res.Detail)
		}
	}
}
