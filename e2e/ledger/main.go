// Command ledger is the end-to-end suite's fencing-aware HTTP sink, run in
// its own container: it records every fire (job, item, tick, node, shard,
// token, re-run mark). receiver.Middleware judges each: a fencing token lower
// than the highest seen for that shard gets 409, a repeat of a (job, item,
// tick) is dropped with 200, and package internal/ledger counts both, so the
// suite can count duplicates and stale tokens. GET /ledger returns every fire
// as JSON (ledger.Fire; "item" only for a sharded job's item).
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/shardcron/shardcron/internal/ledger"
	"github.com/shardcron/shardcron/receiver"
)

// fire is the handler of runs: the ledger's record is their whole effect.
func fire(l *ledger.Ledger) http.Handler {
	return receiver.Middleware(l.Store(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(http.StatusNoContent)
	}), receiver.WithObserver(l.Observe))
}

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	flag.Parse()
	l := ledger.New()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ledger", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l.Fires())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("POST /", fire(l))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("ledger listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
