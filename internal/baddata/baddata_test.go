package baddata

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncWriter lets the concurrent test's log lines land one at a time.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A bad value is logged and counted once however often it is read; a new
// value of the same key is a new report.
func TestReportOncePerKeyAndRevision(t *testing.T) {
	reg := prometheus.NewRegistry()
	var out syncWriter
	r, err := New(reg, slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	why := errors.New("invalid character 'x'")
	if !r.Report(Record, "/shardcron/c/ticks/00001/job-a", 7, why, "job parked") {
		t.Fatal("first report not reported")
	}
	for range 5 {
		if r.Report(Record, "/shardcron/c/ticks/00001/job-a", 7, why, "job parked") {
			t.Fatal("a repeat was reported again")
		}
	}
	if !r.Report(Record, "/shardcron/c/ticks/00001/job-a", 9, why, "job parked") {
		t.Fatal("a new revision of the key was not reported")
	}
	if got := testutil.ToFloat64(r.total.WithLabelValues("job_record")); got != 2 {
		t.Fatalf("job_record count %v, want 2", got)
	}
	if r.Count(Record) != 2 || r.Count(History) != 0 {
		t.Fatalf("Count: record %d history %d", r.Count(Record), r.Count(History))
	}
	if n := strings.Count(out.String(), "bad data in etcd"); n != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", n, out.String())
	}
	for _, want := range []string{"kind=job_record", "key=/shardcron/c/ticks/00001/job-a", "revision=7", "invalid character", `action="job parked"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
	// Every kind has its series from the start.
	n, err := testutil.GatherAndCount(reg, "shardcron_etcd_bad_data_total")
	if err != nil || n != len(Kinds) {
		t.Fatalf("%d series (%v), want %d", n, err, len(Kinds))
	}
}

// The memory of reported values is bounded: past maxSeen it starts over.
func TestSeenIsBounded(t *testing.T) {
	r, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxSeen {
		r.Report(History, fmt.Sprintf("k%d", i), 1, errors.New("x"), "skipped")
		if len(r.seen) > maxSeen {
			t.Fatalf("%d values remembered, bound %d", len(r.seen), maxSeen)
		}
	}
}

// Concurrent reports of one value count once.
func TestConcurrentReportsCountOnce(t *testing.T) {
	var out syncWriter
	r, err := New(nil, slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 16 {
		wg.Go(func() {
			if r.Report(ShardKey, "k", 3, errors.New("no owner"), "counted as unowned") {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 || r.Count(ShardKey) != 1 {
		t.Fatalf("%d first reports, count %d; want 1 and 1", firsts, r.Count(ShardKey))
	}
}

// A nil Reporter is a no-op, so packages work without one.
func TestNilReporter(t *testing.T) {
	var r *Reporter
	if r.Report(Meta, "k", 1, errors.New("x"), "y") || r.Count(Meta) != 0 {
		t.Fatal("nil reporter reported")
	}
}
