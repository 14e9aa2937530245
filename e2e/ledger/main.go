// Command ledger is the end-to-end suite's fencing-aware HTTP sink, run in
// its own container: it records every fire (job, tick, node, shard, token,
// re-run mark) and rejects, with 409, a fencing token lower than the highest
// it has accepted for that shard, as docs/design.md asks of a receiver (package
// internal/ledger keeps the books). It does not dedupe: it accepts a repeat
// of a (job, tick) and marks it, so the suite can count duplicates. GET
// /ledger returns every fire as JSON (ledger.Fire).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/shardcron/shardcron/internal/ledger"
)

func fire(l *ledger.Ledger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		f, err := ledger.Parse(r.Header, time.Now().UTC())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if f = l.Record(f); !f.Accepted {
			http.Error(w, fmt.Sprintf("stale fencing token %d for shard %d", f.Token, f.Shard), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
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
	mux.HandleFunc("POST /", fire(l))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("ledger listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}
