// Command ledger is the end-to-end suite's fencing-aware HTTP sink, run in
// its own container: it records every fire (job, tick, node, shard, token,
// re-run mark) and rejects, with 409, a fencing token lower than the highest
// it has accepted for that shard, as DESIGN.md asks of a receiver. It does
// not dedupe: it accepts a repeat of a (job, tick) and marks it, so the
// suite can count duplicates. GET /ledger returns every fire as JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fire is one request received; the suite decodes the same JSON.
type Fire struct {
	Job      string    `json:"job"`
	Tick     time.Time `json:"tick"`
	Shard    int       `json:"shard"`
	Token    int64     `json:"token"`
	Node     string    `json:"node"`
	Rerun    bool      `json:"rerun"`
	At       time.Time `json:"at"`
	Accepted bool      `json:"accepted"` // false: a stale token, rejected
	Dup      bool      `json:"dup"`      // an accepted repeat of a (job, tick)
}

type ledger struct {
	mu      sync.Mutex
	highest map[int]int64 // shard -> highest token accepted
	seen    map[string]bool
	fires   []Fire
}

func (l *ledger) fire(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	h := r.Header
	tick, err1 := time.Parse(time.RFC3339, h.Get("Shardcron-Tick"))
	shard, err2 := strconv.Atoi(h.Get("Shardcron-Shard"))
	token, err3 := strconv.ParseInt(h.Get("Shardcron-Fencing-Token"), 10, 64)
	if h.Get("Shardcron-Job") == "" || err1 != nil || err2 != nil || err3 != nil {
		http.Error(w, "missing or malformed Shardcron-* identity headers", http.StatusBadRequest)
		return
	}
	f := Fire{Job: h.Get("Shardcron-Job"), Tick: tick.UTC(), Shard: shard, Token: token,
		Node: h.Get("Shardcron-Node"), Rerun: h.Get("Shardcron-Rerun") == "true", At: time.Now().UTC()}
	l.mu.Lock()
	// The comparison and the effect (recording) happen under one lock: the
	// receiver's "one transaction".
	f.Accepted = token >= l.highest[shard]
	if f.Accepted {
		l.highest[shard] = token
		key := f.Job + "@" + f.Tick.Format(time.RFC3339)
		f.Dup = l.seen[key]
		l.seen[key] = true
	}
	l.fires = append(l.fires, f)
	l.mu.Unlock()
	if !f.Accepted {
		http.Error(w, fmt.Sprintf("stale fencing token %d for shard %d", token, shard), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (l *ledger) dump(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	fires := append([]Fire(nil), l.fires...)
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(fires)
}

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	flag.Parse()
	l := &ledger{highest: map[int]int64{}, seen: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ledger", l.dump)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /", l.fire)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("ledger listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
