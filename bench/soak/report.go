package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// result is the soak's JSON summary.
type result struct {
	Jobs     int       `json:"jobs"`
	Duration string    `json:"duration"`
	Start    time.Time `json:"start"`
	Samples  []point   `json:"samples"`
	// Expected and Missed count (job, second) pairs of the measured
	// stretch (the run without its warm-up and drain).
	Expected   int64 `json:"expected"`
	Missed     int64 `json:"missed"`
	Received   int64 `json:"received"`
	Duplicates int64 `json:"duplicates"`
	// NospaceSeen: the replica's shardcron_etcd_nospace was 1 at a sample.
	NospaceSeen bool `json:"nospace_seen"`
	// DBMax is the largest database file seen; DBAt10m and DBEnd the file
	// at the first sample 10 minutes in (well past the first compaction,
	// after 3 minutes of history) and at the last. Flat: DBEnd at most
	// flatSlack times DBAt10m.
	DBMax    int64 `json:"db_max_bytes"`
	DBAt10m  int64 `json:"db_at_10m_bytes"`
	DBEnd    int64 `json:"db_end_bytes"`
	LagP50Ms int64 `json:"lag_p50_ms"`
	LagP99Ms int64 `json:"lag_p99_ms"`
}

// point is one sample.
type point struct {
	ElapsedS  float64 `json:"elapsed_s"`
	DBSize    int64   `json:"db_size_bytes"`
	DBInUse   int64   `json:"db_in_use_bytes"`
	Quota     int64   `json:"db_quota_bytes"`
	Nospace   bool    `json:"nospace"`
	HeapInuse int64   `json:"heap_inuse_bytes"`
	Received  int64   `json:"received"`
	Dups      int64   `json:"duplicates"`
	Reruns    int64   `json:"reruns"`
	LagP50Ms  int64   `json:"lag_p50_ms"`
	LagP99Ms  int64   `json:"lag_p99_ms"`
	Err       string  `json:"error,omitempty"`
}

func (p point) String() string {
	s := fmt.Sprintf("%6.0fs db %7.1f MiB (in use %7.1f, quota %5.0f) nospace %-5v heap %6.1f MiB received %9d dup %d (re-runs %d) lag p50 %4d ms p99 %5d ms",
		p.ElapsedS, mib(p.DBSize), mib(p.DBInUse), mib(p.Quota), p.Nospace, mib(p.HeapInuse), p.Received, p.Dups, p.Reruns, p.LagP50Ms, p.LagP99Ms)
	if p.Err != "" {
		s += " scrape: " + p.Err
	}
	return s
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// sample reads the replica's metrics and the sink's interval.
func sample(ctx context.Context, url string, snk *sink, start time.Time) point {
	p := point{ElapsedS: time.Since(start).Seconds()}
	recv, dup, reruns, p50, p99 := snk.interval()
	p.Received, p.Dups, p.Reruns = recv, dup, reruns
	p.LagP50Ms, p.LagP99Ms = p50.Milliseconds(), p99.Milliseconds()
	mf, err := scrape(ctx, url)
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.DBSize = int64(sum(mf, "shardcron_etcd_db_size_bytes"))
	p.DBInUse = int64(sum(mf, "shardcron_etcd_db_size_in_use_bytes"))
	p.Quota = int64(sum(mf, "shardcron_etcd_db_quota_bytes"))
	p.Nospace = sum(mf, "shardcron_etcd_nospace") > 0
	p.HeapInuse = int64(sum(mf, "go_memstats_heap_inuse_bytes"))
	return p
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// sum adds the values of every series of a gauge or counter.
func sum(mf map[string]*dto.MetricFamily, name string) float64 {
	f := mf[name]
	if f == nil {
		return 0
	}
	var v float64
	for _, m := range f.GetMetric() {
		v += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	return v
}

// summarize fills the summary fields from the samples.
func (r *result) summarize(snk *sink) {
	for _, p := range r.Samples {
		r.NospaceSeen = r.NospaceSeen || p.Nospace
		r.DBMax = max(r.DBMax, p.DBSize)
		if r.DBAt10m == 0 && p.ElapsedS >= 600 {
			r.DBAt10m = p.DBSize
		}
		r.DBEnd = p.DBSize
	}
	p50, p99 := snk.overall()
	r.LagP50Ms, r.LagP99Ms = p50.Milliseconds(), p99.Milliseconds()
}

func report(w io.Writer, r result) {
	fmt.Fprintf(w, "\nsoak: %d jobs every second for %s from %s\n", r.Jobs, r.Duration, r.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "  fires received %d, duplicates %d; measured stretch: expected %d, missed %d\n", r.Received, r.Duplicates, r.Expected, r.Missed)
	fmt.Fprintf(w, "  lag p50 %d ms, p99 %d ms over the whole run\n", r.LagP50Ms, r.LagP99Ms)
	fmt.Fprintf(w, "  etcd database: max %.1f MiB, %.1f MiB at 10 min, %.1f MiB at the end; NOSPACE seen: %v\n", mib(r.DBMax), mib(r.DBAt10m), mib(r.DBEnd), r.NospaceSeen)
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	flat := "n/a (under 10 min)"
	if r.DBAt10m > 0 {
		flat = verdict(float64(r.DBEnd) <= flatSlack*float64(r.DBAt10m))
	}
	fmt.Fprintf(w, "  targets: no NOSPACE %s; 0 missed %s; database flat from 10 min to the end (within %.0f%%) %s\n",
		verdict(!r.NospaceSeen), verdict(r.Missed == 0), (flatSlack-1)*100, flat)
}

// flatSlack is how much the database file may grow from 10 minutes in to
// the end and still count as flat: pages freed by compaction are reused,
// not returned, so the file wanders a little.
const flatSlack = 1.1
