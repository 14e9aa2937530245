package jobstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/internal/poll"
)

// watcher runs Watch in the background and hands each set to the test.
// fn stays blocked on a set until the test asks for the next one, so the
// test decides what happens in etcd while the watcher is busy; the
// goroutine is joined at cleanup.
type watcher struct {
	sets    chan config.JobSet
	ack     chan struct{}
	pending bool // fn is blocked on a delivered set, waiting for ack
	cancel  context.CancelFunc
	done    chan error // receives Watch's result, then is closed
}

func startWatch(t *testing.T, cli *clientv3.Client, ks keyspace.Space) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{sets: make(chan config.JobSet), ack: make(chan struct{}), cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer close(w.done)
		w.done <- Watch(ctx, cli, ks, func(s config.JobSet) {
			select {
			case w.sets <- s:
			case <-ctx.Done():
				return
			}
			select {
			case <-w.ack:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop cancels the watch and checks that it returns nil promptly.
func (w *watcher) stop(t *testing.T) {
	w.cancel()
	select {
	case err, ok := <-w.done:
		if ok && err != nil {
			t.Errorf("Watch returned %v after its context was cancelled, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Watch did not return within 10s of its context being cancelled")
	}
}

// release lets fn return from the set it is blocked on, if any.
func (w *watcher) release(t *testing.T) {
	t.Helper()
	if !w.pending {
		return
	}
	select {
	case w.ack <- struct{}{}:
		w.pending = false
	case <-time.After(30 * time.Second):
		t.Fatal("fn did not take its release within 30s")
	}
}

// next releases fn from the previous set, then waits for the next one and
// leaves fn blocked on it.
func (w *watcher) next(t *testing.T) config.JobSet {
	t.Helper()
	w.release(t)
	select {
	case s := <-w.sets:
		w.pending = true
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no job set delivered within 30s")
		return config.JobSet{}
	}
}

// quiet checks that nothing more is delivered for a while: a duplicate
// would arrive right away, so a short window is a real check.
func (w *watcher) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	w.release(t)
	select {
	case s := <-w.sets:
		t.Fatalf("unexpected delivery of version %d", s.Version)
	case <-time.After(d):
	}
}

func TestWatchDeliversEachVersionOnceInOrder(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("watch")
	w := startWatch(t, s.Client(t), ks)
	if first := w.next(t); first.Version != 0 || len(first.Jobs) != 0 {
		t.Fatalf("first delivery on an empty cluster = %+v", first)
	}
	var last int64
	for gen := 1; gen <= 5; gen++ {
		res := mustApply(t, cli, ks, jobs(0, 10+gen, gen), ApplyOptions{})
		got := w.next(t)
		if got.Version != res.Version || fingerprint(got.Jobs) != fingerprint(jobs(0, 10+gen, gen)) || got.Version <= last {
			t.Fatalf("delivered version %d (%d jobs), applied %d", got.Version, len(got.Jobs), res.Version)
		}
		last = got.Version
		// An unchanged re-apply writes nothing and delivers nothing.
		mustApply(t, cli, ks, jobs(0, 10+gen, gen), ApplyOptions{})
	}
	w.quiet(t, 300*time.Millisecond)
}

func TestWatchBurstIsInOrderWithoutDuplicates(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("burst")
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		seen []int64
	)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, s.Client(t), ks, func(s config.JobSet) {
			mu.Lock()
			seen = append(seen, s.Version)
			mu.Unlock()
		})
	}()
	var final int64
	for gen := 1; gen <= 20; gen++ {
		final = mustApply(t, cli, ks, jobs(0, 5, gen), ApplyOptions{}).Version
	}
	poll.Must(t, 30*time.Second, fmt.Sprintf("the watch reaches version %d", final), poll.True(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == final
	}))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch = %v", err)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("versions out of order or repeated: %v", seen)
		}
	}
}

func TestWatchRelistsAfterCompaction(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("compact")
	compact := func() {
		t.Helper()
		resp, err := cli.Get(testCtx(t, 10*time.Second), "any")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(testCtx(t, 10*time.Second), resp.Header.Revision); err != nil {
			t.Fatalf("compact: %v", err)
		}
	}
	v1 := mustApply(t, cli, ks, jobs(0, 10, 1), ApplyOptions{}).Version
	w := startWatch(t, s.Client(t), ks)

	// fn is blocked on v1, so the etcd watch has not started; meanwhile v2
	// is applied and history compacted: the watch starts on a compacted
	// revision and must list again.
	held := w.next(t)
	if held.Version != v1 {
		t.Fatalf("first delivery %d, want %d", held.Version, v1)
	}
	v2 := mustApply(t, cli, ks, jobs(0, 10, 2), ApplyOptions{}).Version
	compact()
	if got := w.next(t); got.Version != v2 || fingerprint(got.Jobs) != fingerprint(jobs(0, 10, 2)) {
		t.Fatalf("after compaction delivered %d, want %d", got.Version, v2)
	}

	// v3 arrives by the etcd watch; fn is blocked on it while v4 and v5 are
	// applied and history compacted, so the chunks of v4 can no longer be
	// read at v4's revision: the watcher lists again and delivers v5,
	// skipping v4.
	v3 := mustApply(t, cli, ks, jobs(0, 10, 3), ApplyOptions{}).Version
	if got := w.next(t); got.Version != v3 {
		t.Fatalf("delivered %d, want %d", got.Version, v3)
	}
	mustApply(t, cli, ks, jobs(0, 10, 4), ApplyOptions{})
	v5 := mustApply(t, cli, ks, jobs(0, 10, 5), ApplyOptions{}).Version
	compact()
	if got := w.next(t); got.Version != v5 || fingerprint(got.Jobs) != fingerprint(jobs(0, 10, 5)) {
		t.Fatalf("after compaction delivered %d, want %d", got.Version, v5)
	}
	w.quiet(t, 300*time.Millisecond)

	// And it keeps following.
	v6 := mustApply(t, cli, ks, jobs(0, 10, 6), ApplyOptions{}).Version
	if got := w.next(t); got.Version != v6 {
		t.Fatalf("delivered %d, want %d", got.Version, v6)
	}
}

// A damaged set and a newer-format set are both reported and skipped: the
// watch goes on, the caller keeps its last good set, and the next good
// apply is delivered. Neither stops Watch, which would stop every replica
// of the cluster at once.
func TestWatchSkipsCorruptionAndNewerFormat(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	ks := keyspace.New("damaged")
	v1 := mustApply(t, cli, ks, jobs(0, 10, 1), ApplyOptions{}).Version
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bad, err := baddata.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sets := make(chan config.JobSet, 10)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, s.Client(t), ks, func(s config.JobSet) { sets <- s }, WithBadData(bad))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
	}()
	if got := (<-sets).Version; got != v1 {
		t.Fatalf("first delivery %d, want %d", got, v1)
	}
	resp, err := cli.Get(testCtx(t, 10*time.Second), ks.JobsCurrent())
	if err != nil {
		t.Fatal(err)
	}
	orig := string(resp.Kvs[0].Value)
	put := func(v string) {
		t.Helper()
		if _, err := cli.Put(testCtx(t, 10*time.Second), ks.JobsCurrent(), v); err != nil {
			t.Fatal(err)
		}
	}
	expectNothing := func(what string, reports int) {
		t.Helper()
		poll.Must(t, 30*time.Second, what+" reported", poll.True(func() bool { return bad.Count(baddata.JobSet) == reports }))
		select {
		case got := <-sets:
			t.Fatalf("%s: delivered version %d", what, got.Version)
		case err := <-done:
			t.Fatalf("%s: Watch returned %v", what, err)
		case <-time.After(300 * time.Millisecond): // a delivery would follow the report at once
		}
	}
	delivered := func(what string, want int64, n int) {
		t.Helper()
		select {
		case got := <-sets:
			if got.Version != want || len(got.Jobs) != n {
				t.Fatalf("%s: delivered version %d (%d jobs), want %d", what, got.Version, len(got.Jobs), want)
			}
		case err := <-done:
			t.Fatalf("%s: Watch returned %v", what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing delivered within 30s", what)
		}
	}

	// A damaged pointer (wrong job count, as if edited by hand): reported,
	// nothing delivered, and the next apply (which must say it replaces a
	// corrupt set) is delivered.
	put(strings.Replace(orig, `"jobs":10`, `"jobs":11`, 1))
	expectNothing("a damaged pointer", 1)
	if _, err := Apply(testCtx(t, time.Minute), cli, ks, jobs(0, 12, 2), ApplyOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Apply over a damaged set = %v, want ErrCorrupt", err)
	}
	v2 := mustApply(t, cli, ks, jobs(0, 12, 2), ApplyOptions{ReplaceCorrupt: true}).Version
	delivered("after a damaged pointer", v2, 12)

	// A newer format: reported and skipped too; the set in force stays.
	put(strings.Replace(orig, `"format":1`, `"format":4`, 1))
	expectNothing("a newer format", 2)
	if _, err := cli.Delete(testCtx(t, 10*time.Second), ks.JobsCurrent()); err != nil {
		t.Fatal(err)
	}
	v3 := mustApply(t, cli, ks, jobs(0, 13, 3), ApplyOptions{}).Version
	delivered("after the newer format was removed", v3, 13)
}
