package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	neturl "net/url"
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
	// HeaderItem, HeaderItems and HeaderItemName are a sharded job's item:
	// its index (from 0), the job's number of items and the item's name;
	// all three absent for a job without items.
	HeaderItem     = "Shardcron-Item"
	HeaderItems    = "Shardcron-Items"
	HeaderItemName = "Shardcron-Item-Name"
	// HeaderTraceparent and HeaderTracestate carry the attempt's W3C Trace
	// Context when the run is traced (scheduler.Run.Trace); a job's own
	// are then replaced, so the target's spans join the run's trace.
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// drainBytes is how much of an unread response body is read and dropped so
// the connection can be reused; a longer body closes the connection instead.
const drainBytes = 64 << 10

// FormatTick formats a tick as runs carry it: RFC 3339 in UTC, with as many
// fractional digits as it has (none for whole seconds).
func FormatTick(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// runHTTP sends one request for r and reads the response up to the bound.
// No expanded secret appears in its detail.
func (rn *Runner) runHTTP(ctx context.Context, r scheduler.Run) scheduler.Result {
	var rd redactor
	res := rn.sendHTTP(ctx, r, &rd)
	res.Detail = rd.apply(res.Detail)
	return res
}

func (rn *Runner) sendHTTP(ctx context.Context, r scheduler.Run, rd *redactor) scheduler.Result {
	h := r.Job.HTTP
	expand := func(s string) (string, error) { return rd.expand(s, rn.lookup(r.Item)) }
	url, err := expand(h.URL)
	if err != nil {
		return failed("url: %v", err)
	}
	body, err := expand(h.Body)
	if err != nil {
		return failed("body: %v", err)
	}
	method := h.Method
	if method == "" {
		method = http.MethodPost // config's default, for jobs built in code
	}
	var rdr io.Reader
	if body != "" {
		rdr = strings.NewReader(body)
	}
	// The run rides on the request's context so that checkRedirect reads
	// the deadline again before following a redirect (another request
	// sent), and knows the job's redirect rule and headers.
	hr := &httpRun{deadline: r.Deadline, follow: h.FollowRedirects}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, httpRunKey{}, hr), method, url, rdr)
	if err != nil {
		return failed("request: %v", err)
	}
	if hr.headers, err = setHeaders(req, r, expand); err != nil {
		return failed("%v", err)
	}

	// Act only inside the deadline: read the clock right before sending,
	// whatever any timer or the scheduler's loss signal has done so far.
	if r.Deadline.Remaining() <= 0 {
		return notStarted(deadlinePassed("request not sent"))
	}
	if ctx.Err() != nil {
		return notStarted(stopped(ctx, r, "request not sent"))
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
			return scheduler.Result{Status: scheduler.StatusTimedOut, Detail: "request: " + err.Error()}
		}
		return failed("request: %v", err)
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

// httpRun is what checkRedirect needs to know of the run whose request it
// sees: it rides on the request's context under httpRunKey.
type httpRun struct {
	deadline scheduler.Deadline
	follow   config.Redirects
	headers  []string // the job's own header names, canonical
}

type httpRunKey struct{}

// maxRedirects is net/http's default bound, kept.
const maxRedirects = 10

// checkRedirect is the client's CheckRedirect. Following a redirect sends
// another request, so the safe deadline is read synchronously right before
// it, as before the first one (the deadline watch looks only every
// ExtendEvery). A redirect is followed as the job's follow_redirects says
// (same_host by default), never from https to http, and without Referer
// (it would carry the previous URL's query, secrets and all). To another
// host the job's headers and body stay behind: net/http would resend them
// all (but Authorization and Cookie) on every hop, and a 307 or 308 the body.
func checkRedirect(req *http.Request, via []*http.Request) error {
	hr, _ := req.Context().Value(httpRunKey{}).(*httpRun)
	if hr == nil {
		hr = &httpRun{} // not a run's request: the defaults
	}
	if hr.follow == config.RedirectsNone {
		return http.ErrUseLastResponse // the 3xx is the answer
	}
	if hr.deadline != nil && hr.deadline.Remaining() <= 0 {
		return errRedirectDeadline
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	req.Header.Del("Referer")
	for _, v := range via {
		if v.URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w: from https to http", ErrRedirectRefused)
		}
	}
	if sameHost(via[0].URL, req.URL) {
		return nil
	}
	if hr.follow != config.RedirectsAny {
		return fmt.Errorf("%w: to another host (follow_redirects: same_host)", ErrRedirectRefused)
	}
	for _, k := range hr.headers {
		req.Header.Del(k)
	}
	if req.Body != nil && req.Body != http.NoBody {
		_ = req.Body.Close()
	}
	req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	return nil
}

// sameHost says whether b is on a's host and port, or is the https of a's
// http on the default ports.
func sameHost(a, b *neturl.URL) bool {
	if !strings.EqualFold(a.Hostname(), b.Hostname()) {
		return false
	}
	pa, pb := portOf(a), portOf(b)
	return pa == pb || a.Scheme == "http" && b.Scheme == "https" && pa == "80" && pb == "443"
}

func portOf(u *neturl.URL) string {
	switch {
	case u.Port() != "":
		return u.Port()
	case u.Scheme == "https":
		return "443"
	}
	return "80"
}

// setIdentityHeaders sets the run's identity on h, replacing the job's own.
func setIdentityHeaders(h http.Header, r scheduler.Run) {
	// The identity replaces whatever the job's own headers said. Every
	// name is canonical already; the values share one allocation.
	delete(h, HeaderRerun)
	delete(h, HeaderTrigger)
	delete(h, HeaderTriggerID)
	delete(h, HeaderAttempt)
	delete(h, HeaderItem)
	delete(h, HeaderItems)
	delete(h, HeaderItemName)
	vals := make([]string, 0, 15)
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
	if !r.Item.IsZero() {
		set(HeaderItem, strconv.Itoa(r.Item.Index))
		set(HeaderItems, strconv.Itoa(r.Item.Count))
		set(HeaderItemName, r.Item.Name)
	}
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
	if r.Trace.Parent != "" {
		delete(h, HeaderTracestate)
		set(HeaderTraceparent, r.Trace.Parent)
		if r.Trace.State != "" {
			set(HeaderTracestate, r.Trace.State)
		}
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

// lookup answers a run's ${NAME} references: the item variables from the
// run's item (none for a job without items), then SHARDCRON_JOB_* from the
// server's environment, by config's rules (validation already refused every
// other name; an unset one is only known here, where the job runs).
func (rn *Runner) lookup(it config.Item) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := it.Var(name); ok {
			return v, true
		}
		if !strings.HasPrefix(name, config.JobVarPrefix) {
			return "", false
		}
		return rn.cfg.Env(name)
	}
}

// expand expands s's references for a run of item it (rn.lookup).
func (rn *Runner) expand(s string, it config.Item) (string, error) {
	return config.Expand(s, rn.lookup(it))
}

// setHeaders sets the job's headers (expanded; Host sets the request's
// host), a default User-Agent, and the run's identity headers last, so no
// job can forge them. It returns the job's header names, canonical.
func setHeaders(req *http.Request, r scheduler.Run, expand func(string) (string, error)) ([]string, error) {
	h := r.Job.HTTP
	req.Header = make(http.Header, len(h.Headers)+8) // the job's, the user agent and the identity
	names := make([]string, 0, len(h.Headers))
	for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
		v, err := expand(h.Headers[k])
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", k, err)
		}
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
		names = append(names, http.CanonicalHeaderKey(k))
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "shardcron")
	}
	setIdentityHeaders(req.Header, r)
	return names, nil
}
