package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardcron/shardcron/internal/procstat"
)

// lagStats summarises a set of lags, in milliseconds.
type lagStats struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// percentile is the nearest-rank percentile p (0 < p <= 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func summarise(lags []time.Duration) lagStats {
	s := slices.Clone(lags)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var m time.Duration
	if len(s) > 0 {
		m = s[len(s)-1]
	}
	return lagStats{P50: ms(percentile(s, 50)), P99: ms(percentile(s, 99)), Max: ms(m)}
}

// metrics is one scrape of a Prometheus text endpoint: series (name plus
// labels) to value.
type metrics map[string]float64

// parseMetrics reads the Prometheus text format: comments skipped, a series
// is "name{labels} value [timestamp]".
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			end = strings.IndexByte(line, ' ') - 1
		}
		if end < 0 {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		series, rest := line[:end+1], strings.Fields(line[end+1:])
		if len(rest) < 1 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(rest[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: value in %q: %w", line, err)
		}
		m[series] = v
	}
	return m, sc.Err()
}

// sum adds every series of name whose labels include each of want (given
// as `key="value"`).
func (m metrics) sum(name string, want ...string) float64 {
	var t float64
	for series, v := range m {
		base, labels, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
			}
		}
		if ok {
			t += v
		}
	}
	return t
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// parseCPU returns utime+stime, in seconds, from the text of /proc/<pid>/stat.
func parseCPU(stat string) (float64, error) {
	f, err := procstat.Fields([]byte(stat))
	if err != nil {
		return 0, fmt.Errorf("cpu: %w", err)
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu: short stat %q", stat)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu: bad utime/stime in %q", stat)
	}
	return float64(u+s) / clockTicks, nil
}
