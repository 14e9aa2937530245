//go:build pprofdebug

package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A CPU profile of the whole process for SHARDCRON_PPROF_SECS seconds,
// starting SHARDCRON_PPROF_DELAY seconds after start (past the start-up,
// for a steady state), or until SIGTERM, written to SHARDCRON_PPROF_DIR;
// only in builds tagged pprofdebug.
func init() {
	dir := os.Getenv("SHARDCRON_PPROF_DIR")
	if dir == "" || len(os.Args) < 2 || os.Args[1] != "server" {
		return
	}
	secs, _ := strconv.Atoi(os.Getenv("SHARDCRON_PPROF_SECS"))
	if secs == 0 {
		secs = 30
	}
	delay, _ := strconv.Atoi(os.Getenv("SHARDCRON_PPROF_DELAY"))
	if tsecs, _ := strconv.Atoi(os.Getenv("SHARDCRON_TRACE_SECS")); tsecs > 0 {
		// An execution trace instead (go tool trace -pprof=sched: where
		// goroutines waited to run), which is too heavy to take beside a
		// CPU profile.
		time.AfterFunc(time.Duration(delay)*time.Second, func() { executionTrace(dir, tsecs) })
		return
	}
	if delay > 0 {
		time.AfterFunc(time.Duration(delay)*time.Second, func() { profile(dir, secs) })
		return
	}
	profile(dir, secs)
}

func profile(dir string, secs int) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		return
	}
	_ = pprof.StartCPUProfile(f)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
			if a, err := os.Create(filepath.Join(dir, fmt.Sprintf("allocs-%d.pprof", os.Getpid()))); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(a, 0)
				a.Close()
			}
		})
	}
	time.AfterFunc(time.Duration(secs)*time.Second, stop)
	// A shutdown signal ends the profile early (the process exits soon).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() { <-sig; stop() }()
}

func executionTrace(dir string, secs int) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("trace-%d.out", os.Getpid())))
	if err != nil {
		return
	}
	if trace.Start(f) != nil {
		f.Close()
		return
	}
	time.AfterFunc(time.Duration(secs)*time.Second, func() { trace.Stop(); f.Close() })
}
