package receiver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The identity headers every HTTP run carries (runner.Header*).
const (
	HeaderCluster      = "Shardcron-Cluster"
	HeaderJob          = "Shardcron-Job"
	HeaderTick         = "Shardcron-Tick"
	HeaderShard        = "Shardcron-Shard"
	HeaderFencingToken = "Shardcron-Fencing-Token"
	HeaderNode         = "Shardcron-Node"
	HeaderRerun        = "Shardcron-Rerun"
	// HeaderItem and HeaderItemName are a sharded job's item: its index
	// and its name; absent for a job without items.
	HeaderItem     = "Shardcron-Item"
	HeaderItemName = "Shardcron-Item-Name"
)

// ParseHeader reads a run's identity from its headers. Job, Tick, Shard
// and Fencing-Token are required (ErrIdentity otherwise); Cluster may be
// absent, and the item is absent for a job without items.
func ParseHeader(h http.Header) (Delivery, error) {
	return parse(func(name string) string { return h.Get(name) }, identityNames{
		HeaderCluster, HeaderJob, HeaderItem, HeaderItemName, HeaderTick, HeaderShard, HeaderFencingToken, HeaderNode, HeaderRerun})
}

// identityNames are the names an identity is read by, headers or
// environment variables.
type identityNames struct {
	cluster, job, item, itemName, tick, shard, token, node, rerun string
}

// parse reads an identity through get. An item is known by its name, or
// by its index when the name is missing (an item's name is its index
// unless the job names its items).
func parse(get func(string) string, n identityNames) (Delivery, error) {
	t, err1 := time.Parse(time.RFC3339Nano, get(n.tick))
	sh, err2 := strconv.Atoi(get(n.shard))
	tok, err3 := strconv.ParseInt(get(n.token), 10, 64)
	d := Delivery{Cluster: get(n.cluster), Job: get(n.job), Item: get(n.itemName), Tick: t.UTC(),
		Shard: sh, Token: tok, Node: get(n.node), Rerun: get(n.rerun) == "true"}
	if d.Item == "" {
		d.Item = get(n.item)
	}
	if d.Job == "" || err1 != nil || err2 != nil || err3 != nil || strings.Contains(d.Item, unitSep) {
		return Delivery{}, ErrIdentity
	}
	return d, nil
}

// Option configures Middleware.
type Option func(*options)

type options struct {
	replay  bool
	observe func(*http.Request, Ticket)
}

// WithReplay answers a repeat with the status its first delivery's
// handler answered, instead of 200.
func WithReplay() Option { return func(o *options) { o.replay = true } }

// WithObserver calls f with every identified request's ticket, before the
// answer: to log or count repeats and stale tokens. f must not block.
func WithObserver(f func(*http.Request, Ticket)) Option {
	return func(o *options) { o.observe = f }
}

type ctxKey struct{}

// FromContext returns the delivery Middleware accepted, in the wrapped
// handler's request context.
func FromContext(ctx context.Context) (Delivery, bool) {
	d, ok := ctx.Value(ctxKey{}).(Delivery)
	return d, ok
}

// Middleware applies both rules (package doc) to every request before
// next sees it:
//
//   - no identity headers: 400;
//   - Stale: 409, next not called;
//   - Repeat: 200 (or, WithReplay, the first delivery's status), next not
//     called;
//   - Pending: 409 with Retry-After, next not called: the first delivery
//     may still fail, so this one must not count as done;
//   - a Store error: 503;
//   - Accept: next runs; a 2xx answer (or none) completes the key, any
//     other answer or a panic forgets it, so a later delivery applies it.
//
// The request body is left to next; a dropped request's body is not read.
func Middleware(s Store, next http.Handler, opts ...Option) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := ParseHeader(r.Header)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		t, err := Admit(r.Context(), s, d)
		if err != nil {
			http.Error(w, "receiver: "+http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
			return
		}
		if o.observe != nil {
			o.observe(r, t)
		}
		switch t.Verdict {
		case Stale:
			http.Error(w, fmt.Sprintf("stale fencing token %d for shard %d (highest %d)", d.Token, d.Shard, t.Highest), http.StatusConflict)
		case Pending:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "a delivery of this run is in progress", http.StatusConflict)
		case Repeat:
			code := http.StatusOK
			if o.replay && t.Status != 0 {
				code = t.Status
			}
			w.WriteHeader(code)
		case Accept:
			serve(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, d)), next, t)
		}
	})
}

// serve runs next for an accepted ticket and finishes the ticket by its
// answer, also when next panics.
func serve(w http.ResponseWriter, r *http.Request, next http.Handler, t Ticket) {
	sw := &statusWriter{ResponseWriter: w}
	finished := false
	defer func() {
		ctx := context.WithoutCancel(r.Context()) // the client may be gone
		if !finished || sw.status()/100 != 2 {
			_ = t.store.Forget(ctx, t.Key())
			return
		}
		_ = t.store.Complete(ctx, t.Key(), sw.status())
	}()
	next.ServeHTTP(sw, r)
	finished = true
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
