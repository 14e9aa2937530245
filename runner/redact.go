package runner

import (
	"net/http"
	"strings"
)

// redactURL returns err's text with the request's expanded URL put back as
// the job wrote it (${SHARDCRON_JOB_*} references unexpanded). net/http
// quotes the URL in its errors, and a run's detail goes to the log, the
// job's history, the API and `status`: a secret in a URL's query must reach
// the target and nowhere else.
func redactURL(err error, req *http.Request, expanded, written string) string {
	msg := err.Error()
	if expanded == written {
		return msg
	}
	forms := []string{expanded}
	if req != nil && req.URL != nil {
		forms = append(forms, req.URL.String(), req.URL.Redacted())
	}
	for _, f := range forms {
		if f != "" && f != written {
			msg = strings.ReplaceAll(msg, f, written)
		}
	}
	return msg
}
