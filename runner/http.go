package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The identity headers every HTTP run sends. A job's own headers of the same
// names are replaced, so a job cannot forge its identity.
const (
	HeaderCluster      = "Shardcron-Cluster"
	HeaderJob          = "Shardcron-Job"
	HeaderTick         = "Shardcron-Tick" // RFC 3339, UTC
	HeaderShard        = "Shardcron-Shard"
	HeaderFencingToken = "Shardcron-Fencing-Token"
	HeaderNode         = "Shardcron-Node"
	// HeaderRerun is "true" when the tick runs again because its earlier
	// run, under an older token, was interrupted; absent otherwise.
	HeaderRerun = "Shardcron-Rerun"
	// HeaderTrigger is "manual" on a run of a manual tick (shardcron
	// trigger), HeaderTriggerID its request's id; both absent otherwise.
	HeaderTrigger   = "Shardcron-Trigger"
	HeaderTriggerID = "Shardcron-Trigger-Id"
	// HeaderAttempt is the attempt of the tick on a retry (2, 3, ...);
	// absent on the first attempt.
	HeaderAttempt = "Shardcron-Attempt"
)

// drainBytes is how much of an unread response body is read and dropped so
// the connection can be reused; a longer body closes the connection instead.
const drainBytes = 64 << 10

// FormatTick formats a tick as runs carry it: RFC 3339 in UTC, with as many
// fractional digits as it has (none for whole seconds).
func FormatTick(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// runHTTP sends one request for r and reads the response up to the bound.
func (rn *Runner) runHTTP(ctx context.Context, r scheduler.Run) scheduler.Result {
	h := r.Job.HTTP
	url, err := rn.expand(h.URL)
	if err != nil {
		return failed("url: %v", err)
	}
	body, err := rn.expand(h.Body)
	if err != nil {
		return failed("body: %v", err)
	}
	method := h.Method
	if method == "" {
		method = http.MethodPost // config's default, for jobs built in code
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// The deadline rides on the request's context so that checkRedirect
	// reads it again before following a redirect (another request sent).
	req, err := http.NewRequestWithContext(context.WithValue(ctx, deadlineKey{}, r.Deadline), method, url, rd)
	if err != nil {
		return failed("request: %s", redactURL(err, nil, url, h.URL))
	}
	if err := rn.setHeaders(req, r); err != nil {
		return failed("%v", err)
	}

	// Act only inside the deadline: read the clock right before sending,
	// whatever any timer or the scheduler's loss signal has done so far.
	if r.Deadline.Remaining() <= 0 {
		return deadlinePassed("request not sent")
	}
	if ctx.Err() != nil {
		return stopped(ctx, r, "request not sent")
	}
	resp, err := rn.client.Do(req)
	if err != nil {
		if errors.Is(err, errRedirectDeadline) {
			return deadlinePassed("redirect not followed")
		}
		if ctx.Err() != nil {
			return stopped(ctx, r, "request abandoned")
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return scheduler.Result{Status: scheduler.StatusTimedOut, Detail: "request: " + redactURL(err, req, url, h.URL)}
		}
		return failed("request: %s", redactURL(err, req, url, h.URL))
	}
	out, truncated, rerr := readBounded(resp.Body, rn.cfg.MaxResponseBytes)
	rn.met.cutIf(truncated, "http")
	if !truncated && rerr == nil {
		// Read a little past the end so the connection goes back to the pool.
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	}
	_ = resp.Body.Close()
	if rerr != nil && ctx.Err() != nil {
		res := stopped(ctx, r, "response abandoned after HTTP "+resp.Status)
		res.Output = out
		return res
	}
	res := scheduler.Result{Status: scheduler.StatusFailed, Detail: "HTTP " + resp.Status, Output: out}
	if expected(resp.StatusCode, h.ExpectStatus) {
		res.Status = scheduler.StatusSucceeded
	}
	if rerr != nil {
		res.Status = scheduler.StatusFailed
		res.Detail += fmt.Sprintf("; reading body: %v", rerr)
	}
	return res
}

// errRedirectDeadline stops a redirect that would be sent past the safe
// deadline.
var errRedirectDeadline = errors.New("runner: safe deadline passed before a redirect")

// deadlineKey is the request context key of the run's scheduler.Deadline.
type deadlineKey struct{}

// maxRedirects is net/http's default bound, kept.
const maxRedirects = 10

// checkRedirect is the client's CheckRedirect: following a redirect sends
// another request, so the safe deadline is read synchronously right before
// it, as before the first one (the deadline watch looks only every
// ExtendEvery).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if d, ok := req.Context().Value(deadlineKey{}).(scheduler.Deadline); ok && d.Remaining() <= 0 {
		return errRedirectDeadline
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// setIdentityHeaders sets the run's identity on h, replacing the job's own.
func setIdentityHeaders(h http.Header, r scheduler.Run) {
	// The identity replaces whatever the job's own headers said. Every
	// name is canonical already; the values share one allocation.
	delete(h, HeaderRerun)
	delete(h, HeaderTrigger)
	delete(h, HeaderTriggerID)
	delete(h, HeaderAttempt)
	vals := make([]string, 0, 10)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(HeaderCluster, r.Cluster)
	set(HeaderJob, r.Job.Name)
	set(HeaderTick, FormatTick(r.Tick))
	set(HeaderShard, strconv.Itoa(r.Shard))
	set(HeaderFencingToken, strconv.FormatInt(r.Token, 10))
	set(HeaderNode, r.Node)
	if r.Rerun {
		set(HeaderRerun, "true")
	}
	if r.Trigger != "" {
		set(HeaderTrigger, "manual")
		set(HeaderTriggerID, r.Trigger)
	}
	if r.Attempt > 1 {
		set(HeaderAttempt, strconv.Itoa(r.Attempt))
	}
}

// expected reports whether code counts as success: one of want, or 2xx when
// want is empty.
func expected(code int, want []int) bool {
	if len(want) == 0 {
		return code >= 200 && code < 300
	}
	return slices.Contains(want, code)
}

// readBounded reads up to max bytes of rd; truncated reports that there was
// more, which is then left unread (the caller closes the body).
func readBounded(rd io.Reader, max int) (out string, truncated bool, err error) {
	if rd == http.NoBody {
		return "", false, nil // a 204, or Content-Length: 0
	}
	buf, err := io.ReadAll(io.LimitReader(rd, int64(max)+1))
	if len(buf) > max {
		buf, truncated = buf[:max], true
	}
	s := strings.ToValidUTF8(string(buf), "\uFFFD")
	if truncated {
		s += fmt.Sprintf("\n[shardcron: response truncated after %d bytes]\n", max)
	}
	return s, truncated, err
}

func failed(format string, args ...any) scheduler.Result {
	return scheduler.Result{Status: scheduler.StatusFailed, Detail: fmt.Sprintf(format, args...)}
}

// expand expands ${SHARDCRON_JOB_*} references against the server's
// environment, by config's rules (validation already refused every other
// name; an unset one is only known here, where the job runs).
func (rn *Runner) expand(s string) (string, error) { return config.Expand(s, rn.cfg.Env) }

// setHeaders sets the job's headers (expanded; Host sets the request's
// host), a default User-Agent, and the run's identity headers last, so no
// job can forge them.
func (rn *Runner) setHeaders(req *http.Request, r scheduler.Run) error {
	h := r.Job.HTTP
	req.Header = make(http.Header, len(h.Headers)+8) // the job's, the user agent and the identity
	for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
		v, err := rn.expand(h.Headers[k])
		if err != nil {
			return fmt.Errorf("header %s: %v", k, err)
		}
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "shardcron")
	}
	setIdentityHeaders(req.Header, r)
	return nil
}
