package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/jobstore"
)

// The drift gauge counts what an apply of --jobs would change in the
// whole set, though the replica holds none of its parts.
func TestFileDriftCountsPartsNotHeld(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("drift")
	file := "jobs:\n"
	for i := range 50 {
		file += fmt.Sprintf("  - {name: job-%02d, schedule: \"@every 1h\", http: {url: \"http://127.0.0.1:9/\"}}\n", i)
	}
	jobs, err := config.ParseJobs("jobs.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := jobstore.Apply(ctx, cli, ks, jobs, jobstore.ApplyOptions{Shards: 8}); err != nil {
		t.Fatal(err)
	}
	got := make(chan *jobstore.Index, 1)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- jobstore.WatchHeld(wctx, cli, ks, 8, jobstore.NewWant(), func(h jobstore.Held) {
			select {
			case got <- h.Index:
			default:
			}
		})
	}()
	x := <-got
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if x.Held(keyspace.ShardOf("job-00", 8)) || x.Len() != len(jobs) {
		t.Fatalf("with nothing wanted: job-00's part held %v, %d jobs indexed; want not held, %d", x.Held(keyspace.ShardOf("job-00", 8)), x.Len(), len(jobs))
	}
	edited := append([]config.Job(nil), jobs[1:]...) // job-00 removed
	edited[3].Schedule = "@every 2h"                 // job-04 changed
	extra, err := config.ParseJobs("more.yaml", []byte("jobs:\n  - {name: new-one, schedule: \"@every 1h\", http: {url: \"http://127.0.0.1:9/\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	edited = append(edited, extra...)
	for file, want := range map[string]struct {
		jobs []config.Job
		n    int
	}{"same": {jobs, 0}, "edited": {edited, 3}} {
		if n, err := fileDrift(ctx, cli, ks, x, want.jobs); err != nil || n != want.n {
			t.Errorf("%s file: drift %d, %v; want %d", file, n, err, want.n)
		}
	}
}
