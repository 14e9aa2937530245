package dashboard

import (
	_ "embed"
	"net/http"
)

// The page is a placeholder until the live dashboard lands: it links the
// APIs so a user of `make run` finds them.
//
//go:embed page.html
var page []byte

func servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}
