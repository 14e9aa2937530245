package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The event stream (GET /api/v1/events, text/event-stream) carries what the
// page draws, as it changes:
//
//   - "state": the same JSON as /api/v1/state. Sent on connect, at most
//     stateEvery after anything changed, and every refreshEvery anyway (the
//     session's remaining time moves without any change).
//   - "changes": a JSON array of ownership changes (acquired, released,
//     lost, joined, left), oldest first, with the event id of the newest.
//     On connect, every change the replica still keeps after Last-Event-ID.
//
// Its source is the replica's watch on own/, which it keeps anyway; nothing
// here reads etcd, and run outcomes are never streamed.
const (
	stateEvery   = 250 * time.Millisecond
	refreshEvery = 5 * time.Second
)

type events struct {
	state func() any
	feed  Feed
}

func (e *events) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy must not buffer the stream
	var seq uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		seq, _ = strconv.ParseUint(v, 10, 64) // unreadable: send everything kept
	}
	fmt.Fprintf(w, "retry: 1000\n\n")
	refresh := time.NewTicker(refreshEvery)
	defer refresh.Stop()
	var pending <-chan time.Time // a state event is due when it fires
	sendState := true
	for {
		changes, last, next := e.feed(seq)
		if len(changes) > 0 {
			if err := writeEvent(w, "changes", last, changes); err != nil {
				return
			}
			seq = last
			if pending == nil {
				pending = time.After(stateEvery)
			}
		}
		if sendState {
			if err := writeEvent(w, "state", 0, e.state()); err != nil {
				return
			}
			sendState = false
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-next:
			if pending == nil {
				pending = time.After(stateEvery)
			}
		case <-pending:
			pending, sendState = nil, true
		case <-refresh.C:
			sendState = true
		}
	}
}

// writeEvent writes one server-sent event; id 0 writes none.
func writeEvent(w http.ResponseWriter, name string, id uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id > 0 {
		if _, err := fmt.Fprintf(w, "id: %d\n", id); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}
