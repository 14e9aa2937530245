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
// `shardcron history -o json` prints too): of the job's item named item
// when item is not "", and for a sharded job without item its items'
// outcomes per tick (control.ItemsHistoryResult); found is false when the
// cluster has no such job. An item the job lacks is an error wrapping
// ErrNotFound, an item of a plain job one wrapping ErrBadRequest.
type RunsFunc func(ctx context.Context, job, item string, limit int) (runs any, found bool, err error)

// runsHandler serves GET /api/v1/jobs/{name}/runs[?item=ITEM]: read on
// demand, never from a watch (package doc).
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
		page, found, err := runs(r.Context(), name, r.URL.Query().Get("item"), limit)
		switch {
		case err != nil:
			writeError(w, err) // 503 unless a bad item
		case !found:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no job %q", name)})
		default:
			writeJSON(w, http.StatusOK, page)
		}
	}
}
