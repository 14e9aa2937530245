package dashboard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
)

// Errors an operator action returns (wrapped) to choose the HTTP status:
// ErrNotFound 404, ErrConflict 409, ErrBadRequest 400; any other error is
// 503 (etcd did not answer: the outcome may be unknown, retry).
var (
	ErrNotFound   = errors.New("dashboard: not found")
	ErrConflict   = errors.New("dashboard: conflict")
	ErrBadRequest = errors.New("dashboard: bad request")
)

// SuspendFunc suspends (suspend true) or resumes job and returns the whole
// response body (control.SuspendResult, which `shardcron suspend -o json`
// prints too). It writes to etcd: the routes that call it need the operate
// role (package httpauth decides that from the method).
type SuspendFunc func(ctx context.Context, job string, suspend bool) (any, error)

func suspendHandler(fn SuspendFunc, suspend bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := fn(r.Context(), r.PathValue("name"), suspend)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// MaxOperate caps the operator actions (trigger, suspend, resume) one
// replica serves at once, a trigger's ?wait= included: each writes to and
// reads from etcd, which the whole cluster shares.
const MaxOperate = 16

// Reasons a bound refuses a request, told to Config.Refused.
const (
	RefusedStream  = "event_stream"
	RefusedOperate = "operator_action"
)

// operateSlots holds one token per operator action in progress.
type operateSlots struct {
	slots   chan struct{}
	refused func()
}

// bound serves h while a slot is free, and 503 with Retry-After when none
// is: an action is refused at once rather than queued behind the others.
func (s operateSlots) bound(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
			h(w, r)
		default:
			s.refused()
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{
				"error": fmt.Sprintf("too many operator actions in progress (%d); retry later", MaxOperate)})
		}
	}
}

// writeError answers {"error": "..."} with the status err's sentinel
// chooses.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrBadRequest):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// OpenAPI is the OpenAPI 3.1 document of /api/v1, served at
// /api/v1/openapi.json. A test checks it against the routes New registers
// and the responses a running replica serves.
//
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
