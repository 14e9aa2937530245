package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/shard"
)

// web is the replica's HTTP server: it serves from the start of Run, the
// starting handler until the replica is wired, then the dashboard, and
// stops last.
type web struct {
	addr     string
	handler  swapHandler
	starting *startStatus // what the starting handler says it waits for
	// stop ends the requests in flight, stops the server (closing the
	// listener) and waits for it. Idempotent.
	stop func()
}

// startHTTP serves Config.Listener; a failure to serve goes to errs.
func (r *Replica) startHTTP(errs chan<- error) *web {
	w := &web{addr: r.cfg.Listener.Addr().String(), starting: &startStatus{}}
	w.handler.Store(startingHandler(w.starting))
	var root http.Handler = &w.handler
	if r.cfg.WrapHTTP != nil {
		root = r.cfg.WrapHTTP(root)
	}
	root = crossOrigin(root, r.refused.WithLabelValues(refusedCrossOrigin))
	// Requests (the event stream above all) end when the server stops.
	baseCtx, endRequests := context.WithCancel(context.Background())
	conns := newConnLimit(r.cfg.Listener, MaxConns, r.refused.WithLabelValues(refusedConnection))
	srv := newServer(root, conns)
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(conns); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("http: %w", err)
		}
	})
	w.stop = sync.OnceFunc(func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		endRequests()
		_ = srv.Shutdown(shutdownCtx)
		wg.Wait()
	})
	r.log.Info("http serving /healthz; the rest once etcd answers", "addr", w.addr)
	return w
}

// crossOrigin refuses every unsafe request (POST and the like) that a
// browser marks as coming from another origin (Sec-Fetch-Site, or an
// Origin that is not the Host), whatever its credentials: a page the
// operator happens to visit cannot make the browser trigger, suspend or
// drain. Requests from scripts and the CLI carry neither header and pass.
func crossOrigin(next http.Handler, refused prometheus.Counter) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refused.Inc()
		http.Error(w, "Forbidden: a cross-origin write (a page of another site asked the browser to send it); "+
			"send writes from a script or the CLI with Authorization: Bearer TOKEN", http.StatusForbidden)
	}))
	return p.Handler(next)
}

// dashboard is the handler of every path once the replica is wired.
func (r *Replica) dashboard(mgr *shard.Manager) (http.Handler, error) {
	reg := r.cfg.Registry
	return dashboard.New(dashboard.Config{
		State:    memberLeases(r.cli, mgr),
		Jobs:     r.jobsPage(mgr),
		Ready:    r.first.ready(mgr.Ready),
		Metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Runs:     r.jobRuns(mgr.BadData()),
		Suspend:  r.suspendRoute(),
		Trigger:  r.triggerRoute(),
		Job:      r.jobDetail(mgr),
		JobKnown: func(name string) bool { _, ok := r.cat.index().Lookup(name); return ok },
		TraceURL: r.cfg.TraceUIURL,
		Changes:  changeFeed(mgr),
		Refused:  func(reason string) { r.refused.WithLabelValues(reason).Inc() },
	})
}

// swapHandler serves whichever handler was stored last: the starting one
// until the replica is wired, then the dashboard.
type swapHandler struct{ atomic.Pointer[http.Handler] }

func (h *swapHandler) Store(next http.Handler) { h.Pointer.Store(&next) }

func (h *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while the replica waits for etcd: alive, not
// ready (saying why), nothing else yet.
func startingHandler(st *startStatus) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: starting ("+st.String()+")", http.StatusServiceUnavailable)
	})
	return mux
}

// changeFeed serves the Manager's ownership changes to the event stream.
func changeFeed(mgr *shard.Manager) dashboard.Feed {
	return func(seq uint64) ([]any, uint64, <-chan struct{}) {
		changes, last, next := mgr.Changes(seq)
		out := make([]any, len(changes))
		for i, c := range changes {
			out[i] = c
		}
		return out, last, next
	}
}

// memberLeases serves the state with each member's lease time left in etcd.
func memberLeases(cli *clientv3.Client, mgr *shard.Manager) func() any {
	lt := &leaseTimes{cli: cli}
	return func() any {
		st := mgr.State()
		lt.fill(&st)
		return st
	}
}
