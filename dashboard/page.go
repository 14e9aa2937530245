package dashboard

import (
	_ "embed"
	"net/http"
)

// The page is one static file with its style and script inline, so it
// works offline and behind any proxy: it draws the shard grid coloured by
// owner, the members against the ideal share and the load bound, the
// timeline of ownership changes with churn per minute, and the jobs table
// a page at a time, each name linking to the job's page (job.go). It
// reads /api/v1/state once, then follows /api/v1/events; the jobs table
// reads /api/v1/jobs on demand.
//
//go:embed page.html
var page []byte

func servePage(w http.ResponseWriter, _ *http.Request) {
	pageHeaders(w)
	_, _ = w.Write(page)
}

// pageHeaders are the headers of every HTML page.
func pageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// Nothing but the page itself: no external scripts, styles or fonts.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:")
}
