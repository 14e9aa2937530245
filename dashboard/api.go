package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Config supplies what the handlers read. Every function must be safe for
// concurrent use and cheap enough to call per request.
type Config struct {
	// State returns the ownership snapshot served at /api/v1/state.
	State func() any
	// Jobs returns one page of the jobs table: the jobs q selects, in name
	// order, [q.Offset, q.Offset+q.Limit) of them, how many q selects, and
	// how current the page is.
	Jobs func(ctx context.Context, q JobsQuery) (JobsPage, error)
	// Ready reports nil when the replica's lease is valid and its claims
	// succeed.
	Ready func() error
	// Metrics serves /metrics; nil serves 404.
	Metrics http.Handler
	// Runs serves /api/v1/jobs/{name}/runs (runs.go); nil serves 404.
	Runs RunsFunc
	// Changes feeds /api/v1/events; nil serves 404 there (the page then
	// polls the state API instead).
	Changes Feed
	// Suspend serves POST /api/v1/jobs/{name}/suspend and /resume (ops.go);
	// nil serves 404.
	Suspend SuspendFunc
	// Trigger serves POST /api/v1/jobs/{name}/trigger (trigger.go); nil
	// serves 404.
	Trigger TriggerFunc
	// Job serves GET /api/v1/jobs/{name} (job.go); nil serves 404 there
	// and at the job page.
	Job JobFunc
	// JobKnown says whether the cluster has a job by that name, from what
	// the replica holds (no read of etcd): the job page, /jobs/{name},
	// answers 404 by it, and its script reads the rest through Job.
	JobKnown func(name string) bool
	// TraceURL, when not "", links the job page's trace ids: a URL in
	// which {trace_id} stands for the id (settings.CheckTraceUIURL).
	TraceURL string
	// Refused, when set, is told of every request a bound refused, by
	// reason (RefusedStream, RefusedOperate). It must not block.
	Refused func(reason string)
}

// Feed returns the ownership changes recorded after seq, oldest first, the
// newest sequence number, and a channel closed at the next change (of the
// state too: a re-read of ownership with no change of its own closes it).
// It never blocks and is safe for concurrent use.
type Feed func(seq uint64) (changes []any, last uint64, next <-chan struct{})

// JobsQuery selects a page of the jobs table.
type JobsQuery struct {
	Offset, Limit int
	// Search keeps the jobs whose name contains it ("" keeps all).
	Search string
	// Shard keeps the jobs of one shard; -1 keeps all.
	Shard int
}

// Jobs API paging bounds.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// New returns the handler for every path of the contract.
func New(cfg Config) (http.Handler, error) {
	mux, err := newMux(cfg)
	if err != nil {
		return nil, err
	}
	return mux, nil
}

// Routes lists the patterns New registers for cfg ("GET /api/v1/state"),
// in registration order: what the OpenAPI document must describe.
func Routes(cfg Config) ([]string, error) {
	mux, err := newMux(cfg)
	if err != nil {
		return nil, err
	}
	return mux.patterns, nil
}

// routeMux is a ServeMux that remembers its patterns, so that Routes and
// the OpenAPI check see every route however it was added.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func newMux(cfg Config) (*routeMux, error) {
	if cfg.State == nil || cfg.Jobs == nil || cfg.Ready == nil {
		return nil, errors.New("dashboard: State, Jobs and Ready are required")
	}
	mux := &routeMux{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := cfg.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /api/v1/state", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, cfg.State())
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		q, err := jobsQuery(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		page, err := cfg.Jobs(r.Context(), q)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		out := map[string]any{"offset": q.Offset, "limit": q.Limit, "total": page.Total, "jobs": page.Jobs}
		addFreshness(out, page.Fresh, time.Now())
		writeJSON(w, http.StatusOK, out)
	})
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	if cfg.Runs != nil {
		mux.HandleFunc("GET /api/v1/jobs/{name}/runs", runsHandler(cfg.Runs))
	}
	if cfg.Job != nil {
		mux.HandleFunc("GET /api/v1/jobs/{name}", jobHandler(cfg.Job))
		mux.HandleFunc("GET /jobs/{name}", jobPageHandler(cfg.JobKnown, cfg.TraceURL))
	}
	if cfg.Changes != nil {
		mux.Handle("GET /api/v1/events", newEvents(cfg.State, cfg.Changes, refused(cfg.Refused, RefusedStream)))
	}
	slots := operateSlots{slots: make(chan struct{}, MaxOperate), refused: refused(cfg.Refused, RefusedOperate)}
	if cfg.Suspend != nil {
		mux.HandleFunc("POST /api/v1/jobs/{name}/suspend", slots.bound(suspendHandler(cfg.Suspend, true)))
		mux.HandleFunc("POST /api/v1/jobs/{name}/resume", slots.bound(suspendHandler(cfg.Suspend, false)))
	}
	if cfg.Trigger != nil {
		mux.HandleFunc("POST /api/v1/jobs/{name}/trigger", slots.bound(triggerHandler(cfg.Trigger)))
	}
	mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	mux.HandleFunc("GET /{$}", servePage)
	return mux, nil
}

// refused is fn bound to reason, or a no-op when fn is nil.
func refused(fn func(string), reason string) func() {
	if fn == nil {
		return func() {}
	}
	return func() { fn(reason) }
}

// jobsQuery reads ?offset=&limit=&q=&shard= with bounds.
func jobsQuery(r *http.Request) (JobsQuery, error) {
	jq := JobsQuery{Limit: DefaultPageSize, Shard: -1}
	q := r.URL.Query()
	var err error
	if jq.Offset, jq.Limit, err = pageBounds(r); err != nil {
		return jq, err
	}
	if v := q.Get("shard"); v != "" {
		if jq.Shard, err = strconv.Atoi(v); err != nil || jq.Shard < 0 {
			return jq, fmt.Errorf("shard %q: want a whole number ≥ 0", v)
		}
	}
	jq.Search = q.Get("q")
	if len(jq.Search) > 128 {
		return jq, fmt.Errorf("q: at most 128 characters (a job name's limit)")
	}
	return jq, nil
}

// pageBounds reads ?offset=&limit= (default 0 and DefaultPageSize; limit
// at most MaxPageSize).
func pageBounds(r *http.Request) (offset, limit int, err error) {
	q := r.URL.Query()
	limit = DefaultPageSize
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, fmt.Errorf("offset %q: want a whole number ≥ 0", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxPageSize {
			return 0, 0, fmt.Errorf("limit %q: want 1 to %d", v, MaxPageSize)
		}
	}
	return offset, limit, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
