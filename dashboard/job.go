package dashboard

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
)

// JobFunc returns one job as GET /api/v1/jobs/{name} answers it, the
// whole response body, read afresh; found is false when the cluster has
// no such job. found with an error means the job exists but could not be
// read (503).
type JobFunc func(ctx context.Context, job string, q JobQuery) (detail any, found bool, err error)

// JobQuery is what GET /api/v1/jobs/{name} asks beyond the job: with
// Items (?items=true), the page [Offset, Offset+Limit) of a sharded job's
// items, paged like the jobs API (DefaultPageSize, at most MaxPageSize),
// so that a job of thousands of items is never listed whole by default.
type JobQuery struct {
	Items         bool
	Offset, Limit int
}

// jobQuery reads ?items=&offset=&limit= with the jobs API's bounds.
func jobQuery(r *http.Request) (JobQuery, error) {
	q := JobQuery{Limit: DefaultPageSize}
	if v := r.URL.Query().Get("items"); v != "" {
		var err error
		if q.Items, err = strconv.ParseBool(v); err != nil {
			return q, fmt.Errorf("items %q: want true or false", v)
		}
	}
	var err error
	q.Offset, q.Limit, err = pageBounds(r)
	return q, err
}

// jobHandler serves GET /api/v1/jobs/{name}.
func jobHandler(job JobFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		q, err := jobQuery(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		detail, found, err := job(r.Context(), name, q)
		switch {
		case !found && err == nil:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no job %q", name)})
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		default:
			writeJSON(w, http.StatusOK, detail)
		}
	}
}

// The job page is, like the dashboard, one file with its style and script
// inline; it reads GET /api/v1/jobs/{name} and the job's runs, and writes
// through the operator actions with a token the operator types in, kept in
// the page's memory only.
//
//go:embed jobpage.html
var jobPageHTML string

var jobPage = template.Must(template.New("job").Parse(jobPageHTML))

// jobPageData is what the server puts into the job page: the name, and
// the trace UI template (Config.TraceURL), so that the script needs no
// request to learn either.
type jobPageData struct {
	Name     string
	TraceURL string
}

// jobPageHandler serves GET /jobs/{name}: 404 for a job the cluster does
// not have (known, from the replica's job set; nil knows none); a job
// that cannot be read now still gets its page, which says why its details
// are missing.
func jobPageHandler(known func(string) bool, traceURL string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if known == nil || !known(name) {
			http.Error(w, fmt.Sprintf("no job %q", name), http.StatusNotFound)
			return
		}
		var b bytes.Buffer
		if err := jobPage.Execute(&b, jobPageData{Name: name, TraceURL: traceURL}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		pageHeaders(w)
		_, _ = w.Write(b.Bytes())
	}
}
