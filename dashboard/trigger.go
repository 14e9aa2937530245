package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ErrTimeout is what a TriggerFunc returns (wrapped) when the trigger was
// written but no outcome came within the wait: 504, with the trigger
// itself beside the error.
var ErrTimeout = errors.New("dashboard: no outcome within the wait")

// TriggerFunc writes a trigger request for job (for its item named item
// when item is not "", else for each of a sharded job's items) and, when
// wait > 0, waits that long for the outcome (control.TriggerAndWait); it
// returns the whole response body (control.TriggerResult, or
// control.ItemsTriggerResult for every item, which `shardcron trigger -o
// json` prints too), also beside an ErrTimeout. by says who asked. It
// writes to etcd: the route needs the operate role (package httpauth
// decides that from the method).
type TriggerFunc func(ctx context.Context, job, item, by string, wait time.Duration) (any, error)

// Bounds of POST /api/v1/jobs/{name}/trigger?wait=DURATION.
const (
	DefaultTriggerWait = time.Minute
	MaxTriggerWait     = 10 * time.Minute
	// waitSlack is the time beyond the wait to write the answer.
	waitSlack = 30 * time.Second
)

// triggerHandler serves POST /api/v1/jobs/{name}/trigger[?item=ITEM]: 202
// with the request once written; with ?wait (a duration, or true for a
// minute) 200 with the run's outcome, or 504 when none came within the
// wait. A job or item that does not exist is 404, an item of a plain job
// 400, a suspended job 409 (writeError). Who asked is recorded as the
// client's address.
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
				writeError(w, fmt.Errorf("%w: wait %q: want true or a duration up to %v", ErrBadRequest, v, MaxTriggerWait))
				return
			}
			wait = d
		}
		if wait > 0 {
			// The answer comes after the wait: the server's read and
			// write timeouts are for ordinary requests.
			rc, until := http.NewResponseController(w), time.Now().Add(wait+waitSlack)
			_ = rc.SetReadDeadline(until)
			_ = rc.SetWriteDeadline(until)
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		res, err := trigger(r.Context(), r.PathValue("name"), r.URL.Query().Get("item"), "api@"+host, wait)
		switch {
		case err == nil && wait > 0:
			writeJSON(w, http.StatusOK, res)
		case err == nil:
			writeJSON(w, http.StatusAccepted, res)
		case errors.Is(err, ErrTimeout):
			writeJSON(w, http.StatusGatewayTimeout, map[string]any{"error": err.Error(), "trigger": res})
		default:
			writeError(w, err)
		}
	}
}
