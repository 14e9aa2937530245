package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// Run history paging bounds for GET /api/v1/jobs/{name}/runs?limit=. They
// are control.DefaultHistory and control.MaxHistory, which answer the
// request, copied because this package imports nothing that reaches etcd;
// replica's TestRunsPageBoundsAgree holds them equal.
const (
	DefaultRuns = 20
	MaxRuns     = 1000
)

// RunsFunc returns a job's run history, newest first, at most limit runs,
// with output, as the whole response body (control.HistoryResult, which
// `shardcron history -o json` prints too); found is false when the cluster
// has no such job.
type RunsFunc func(ctx context.Context, job string, limit int) (runs any, found bool, err error)

// runsHandler serves GET /api/v1/jobs/{name}/runs: read on demand, never
// from a watch (package doc).
func runsHandler(runs RunsFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		limit := DefaultRuns
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxRuns {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("limit %q: want 1 to %d", v, MaxRuns)})
				return
			}
			limit = n
		}
		page, found, err := runs(r.Context(), name, limit)
		switch {
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		case !found:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no job %q", name)})
		default:
			writeJSON(w, http.StatusOK, page)
		}
	}
}
