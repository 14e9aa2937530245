//go:build pprofdebug

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"
)

// A CPU profile of the whole process for SHARDCRON_PPROF_SECS seconds,
// written to SHARDCRON_PPROF_DIR; only in builds tagged pprofdebug.
func init() {
	dir := os.Getenv("SHARDCRON_PPROF_DIR")
	if dir == "" || len(os.Args) < 2 || os.Args[1] != "server" {
		return
	}
	secs, _ := strconv.Atoi(os.Getenv("SHARDCRON_PPROF_SECS"))
	if secs == 0 {
		secs = 30
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		return
	}
	_ = pprof.StartCPUProfile(f)
	time.AfterFunc(time.Duration(secs)*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
}
