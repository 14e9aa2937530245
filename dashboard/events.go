package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
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
//
// The streams share one rendering of the state: it is marshalled at most
// once per snapshotEvery however many subscribe, and at most MaxSubscribers
// streams are served at once (the rest get 503 and retry).
const (
	stateEvery   = 250 * time.Millisecond
	refreshEvery = 5 * time.Second
	// snapshotEvery is under stateEvery, so a state event sent stateEvery
	// after a change was rendered after it.
	snapshotEvery = stateEvery / 2
	// MaxSubscribers caps the event streams one replica serves at once.
	MaxSubscribers = 256
	// streamWriteWindow is how long one write of the stream may take: a
	// subscriber that stops reading is dropped after it.
	streamWriteWindow = 30 * time.Second
)

type events struct {
	state   *snapshot
	feed    Feed
	slots   chan struct{} // one token per stream served; cap MaxSubscribers
	refused func()        // told of a stream refused
}

func newEvents(state func() any, feed Feed, refused func()) *events {
	return &events{state: &snapshot{render: state}, feed: feed, slots: make(chan struct{}, MaxSubscribers), refused: refused}
}

// snapshot is the state's JSON, shared by every stream. Safe for
// concurrent use.
type snapshot struct {
	render func() any
	mu     sync.Mutex
	at     time.Time
	json   []byte
}

// get returns the state's JSON, rendered again only when the last
// rendering is snapshotEvery old.
func (s *snapshot) get() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); s.json == nil || now.Sub(s.at) >= snapshotEvery {
		b, err := json.Marshal(s.render())
		if err != nil {
			return nil, err
		}
		s.json, s.at = b, now
	}
	return s.json, nil
}

func (e *events) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	default:
		e.refused()
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("too many event streams (%d); retry later or poll /api/v1/state", MaxSubscribers), http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	// The stream outlives the server's read and write timeouts: it reads
	// nothing more, and each write gets its own window below.
	_ = rc.SetReadDeadline(time.Time{})
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
		if err := rc.SetWriteDeadline(time.Now().Add(streamWriteWindow)); err != nil {
			return
		}
		changes, last, next := e.feed(seq)
		if len(changes) > 0 {
			b, err := json.Marshal(changes)
			if err != nil {
				return
			}
			if err := writeEvent(w, "changes", last, b); err != nil {
				return
			}
			seq = last
			if pending == nil {
				pending = time.After(stateEvery)
			}
		}
		if sendState {
			b, err := e.state.get()
			if err != nil {
				return
			}
			if err := writeEvent(w, "state", 0, b); err != nil {
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

// writeEvent writes one server-sent event of JSON data b; id 0 writes
// none.
func writeEvent(w http.ResponseWriter, name string, id uint64, b []byte) error {
	if id > 0 {
		if _, err := fmt.Fprintf(w, "id: %d\n", id); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	return err
}
