package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Config supplies what the handlers read. Every function must be safe for
// concurrent use and cheap enough to call per request.
type Config struct {
	// State returns the ownership snapshot served at /api/v1/state.
	State func() any
	// Jobs returns one page of the jobs table: jobs [offset, offset+limit)
	// in name order, and the total count.
	Jobs func(ctx context.Context, offset, limit int) (page any, total int, err error)
	// Ready reports nil when the replica's lease is valid and its claims
	// succeed.
	Ready func() error
	// Metrics serves /metrics; nil serves 404.
	Metrics http.Handler
	// Runs serves /api/v1/jobs/{name}/runs (runs.go); nil serves 404.
	Runs RunsFunc
}

// Jobs API paging bounds.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// New returns the handler for every path of the contract.
func New(cfg Config) (http.Handler, error) {
	if cfg.State == nil || cfg.Jobs == nil || cfg.Ready == nil {
		return nil, errors.New("dashboard: State, Jobs and Ready are required")
	}
	mux := http.NewServeMux()
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
		offset, limit, err := paging(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		page, total, err := cfg.Jobs(r.Context(), offset, limit)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"offset": offset, "limit": limit, "total": total, "jobs": page})
	})
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	if cfg.Runs != nil {
		mux.HandleFunc("GET /api/v1/jobs/{name}/runs", runsHandler(cfg.Runs))
	}
	mux.HandleFunc("GET /{$}", servePage)
	return mux, nil
}

// paging reads ?offset=&limit= with bounds.
func paging(r *http.Request) (offset, limit int, err error) {
	limit = DefaultPageSize
	q := r.URL.Query()
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
