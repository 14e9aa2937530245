package scheduler

import (
	"sync"
	"time"
)

// workerIdle is how long a worker goroutine waits for more work before it
// exits.
const workerIdle = time.Minute

// workers runs functions on goroutines kept from one burst to the next. A
// run's stack (scheduler, runner, net/http) and a commit's (gRPC) grow to
// tens of kilobytes; a fresh goroutine grows its stack again by copying,
// and it would do so for every run of an instant, in the instant's burst,
// where it was a tenth of a replica's CPU. A worker idle for workerIdle
// exits, so a spike of runs leaves no goroutines behind.
type workers struct {
	wg   *sync.WaitGroup
	quit <-chan struct{} // closed at shutdown: idle workers exit at once
	work chan func()     // unbuffered: a send succeeds only to an idle worker
}

func newWorkers(wg *sync.WaitGroup, quit <-chan struct{}) *workers {
	return &workers{wg: wg, quit: quit, work: make(chan func())}
}

// Go runs f on an idle worker, or on a new one.
func (p *workers) Go(f func()) {
	select {
	case p.work <- f:
	default:
		p.wg.Go(func() { p.serve(f) })
	}
}

func (p *workers) serve(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // let the finished work's closure go while idle
		idle.Reset(workerIdle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}
