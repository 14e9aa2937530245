package dashboard

import (
	_ "embed"
	"net/http"
)

// The page is static: a script in it polls /api/v1/state and /api/v1/jobs
// every two seconds and draws members, the shard map by owner (free shards
// stand out) and the first jobs with their next fire and last run. It links
// the APIs, so a user of `make run` finds them.
//
//go:embed page.html
var page []byte

func servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}
