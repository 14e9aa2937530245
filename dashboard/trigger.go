package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/shardcron/shardcron/control"
)

// TriggerFunc writes a trigger request for job (control.Trigger) and, when
// wait > 0, waits that long for its outcome (control.Wait).
type TriggerFunc func(ctx context.Context, job, by string, wait time.Duration) (control.TriggerResult, error)

// Bounds of POST /api/v1/jobs/{name}/trigger?wait=DURATION.
const (
	DefaultTriggerWait = time.Minute
	MaxTriggerWait     = 10 * time.Minute
)

// triggerHandler serves POST /api/v1/jobs/{name}/trigger: 202 with the
// request once written; with ?wait (a duration, or true for a minute) 200
// with the run's outcome, or 504 when none came within the wait. A job
// that does not exist is 404, a suspended one 409. Who asked is recorded as
// the client's address.
func triggerHandler(trigger TriggerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var wait time.Duration
		switch v := r.URL.Query().Get("wait"); v {
		case "", "false":
		case "true":
			wait = DefaultTriggerWait
		default:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > MaxTriggerWait {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("wait %q: want true or a duration up to %v", v, MaxTriggerWait)})
				return
			}
			wait = d
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		res, err := trigger(r.Context(), r.PathValue("name"), "api@"+host, wait)
		switch {
		case err == nil && wait > 0:
			writeJSON(w, http.StatusOK, res)
		case err == nil:
			writeJSON(w, http.StatusAccepted, res)
		case errors.Is(err, control.ErrNoJob):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case errors.Is(err, control.ErrSuspended):
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		case errors.Is(err, control.ErrNotPickedUp), errors.Is(err, control.ErrNoOutcome):
			writeJSON(w, http.StatusGatewayTimeout, map[string]any{"error": err.Error(), "trigger": res})
		default:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		}
	}
}
