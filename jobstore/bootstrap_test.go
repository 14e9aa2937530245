package jobstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

func TestBootstrapConcurrentOneApplies(t *testing.T) {
	s := etcdtest.Start(t)
	ks := keyspace.New("boot")
	const replicas = 5

	// Every replica reads the empty cluster and writes its chunks before
	// any flips, so all but one take the conflict path.
	var arrived sync.WaitGroup
	arrived.Add(replicas)
	release := make(chan struct{})
	testHookBeforeFlip = func() { arrived.Done(); <-release }
	t.Cleanup(func() { testHookBeforeFlip = nil })

	type out struct {
		applied bool
		drift   Diff
		err     error
	}
	results := make([]out, replicas)
	var done sync.WaitGroup
	for i := range replicas {
		cli := s.Client(t)
		// Each replica's file differs by one job, so the losers' drift
		// is visible.
		js := append(jobs(0, 20, 1), job(fmt.Sprintf("only-%d", i), 1))
		done.Add(1)
		go func() {
			defer done.Done()
			a, d, err := Bootstrap(testCtx(t, time.Minute), cli, ks, js, ApplyOptions{})
			results[i] = out{a, d, err}
		}()
	}
	arrived.Wait()
	close(release)
	done.Wait()
	testHookBeforeFlip = nil

	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("replica %d: %v", i, r.err)
		}
		if r.applied {
			if winner >= 0 {
				t.Fatalf("replicas %d and %d both applied", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no replica applied")
	}
	cli := s.Client(t)
	set := mustLoad(t, cli, ks)
	if _, ok := byName(set.Jobs)[fmt.Sprintf("only-%d", winner)]; !ok || len(set.Jobs) != 21 {
		t.Fatalf("current set is not the winner's: %d jobs", len(set.Jobs))
	}
	for i, r := range results {
		if i == winner {
			continue
		}
		want := fmt.Sprintf("+ only-%d\n- only-%d\n1 added, 0 changed, 1 removed, 20 unchanged\n", i, winner)
		if r.drift.String() != want {
			t.Errorf("replica %d drift:\n%s\nwant:\n%s", i, r.drift, want)
		}
	}
	wantVersions(t, cli, ks, set.Version) // the losers deleted their versions

	// A later start with the same file: no drift, nothing applied.
	applied, drift, err := Bootstrap(testCtx(t, time.Minute), cli, ks, set.Jobs, ApplyOptions{})
	if err != nil || applied || !drift.Empty() {
		t.Fatalf("Bootstrap on a cluster with the same set = %v, %+v, %v", applied, drift, err)
	}
	// A start with another file: drift reported, the cluster untouched.
	applied, drift, err = Bootstrap(testCtx(t, time.Minute), cli, ks, []config.Job{job("other", 1)}, ApplyOptions{})
	if err != nil || applied || len(drift.Added) != 1 || len(drift.Removed) != 21 {
		t.Fatalf("Bootstrap with another set = %v, %+v, %v", applied, drift, err)
	}
	if mustLoad(t, cli, ks).Version != set.Version {
		t.Fatal("Bootstrap changed an existing job set")
	}

	// A damaged set is still a set: not replaced, no error.
	if _, err := cli.Put(testCtx(t, 10*time.Second), ks.JobsCurrent(), "garbage"); err != nil {
		t.Fatal(err)
	}
	applied, drift, err = Bootstrap(testCtx(t, time.Minute), cli, ks, set.Jobs, ApplyOptions{ReplaceCorrupt: true})
	if err != nil || applied || !drift.Empty() {
		t.Fatalf("Bootstrap over a damaged set = %v, %+v, %v", applied, drift, err)
	}
	if got := versions(t, cli, ks); len(got) != 1 {
		t.Fatalf("Bootstrap over a damaged set wrote a version: %v", got)
	}
}
