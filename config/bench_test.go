package config

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkParseJobs: parsing and validating a file of 100,000 and of
// MaxJobs jobs, as apply and validate do. live-MB is the heap in use after
// a collection with the jobs still held: what a parse costs to keep.
//
//	go test -run '^$' -bench ParseJobs -benchmem -benchtime 3x ./config
func BenchmarkParseJobs(b *testing.B) {
	for _, n := range []int{100_000, MaxJobs} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			data := benchJobsFile(n)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var live uint64
			for b.Loop() {
				jobs, err := ParseJobs("jobs.yaml", data)
				if err != nil || len(jobs) != n {
					b.Fatalf("%d jobs, %v", len(jobs), err)
				}
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				live = ms.HeapInuse
				runtime.KeepAlive(jobs)
				b.StartTimer()
			}
			b.ReportMetric(float64(live)/(1<<20), "live-MB")
		})
	}
}

func benchJobsFile(n int) []byte {
	var buf bytes.Buffer
	buf.WriteString("jobs:\n")
	zones := []string{"UTC", "Europe/Berlin", "America/New_York"}
	for i := range n {
		fmt.Fprintf(&buf, "  - name: tenant-%07d.sync\n    schedule: \"%d */5 * * * *\"\n    timezone: %s\n    http:\n      url: \"${SHARDCRON_JOB_SINK_URL}/sync?tenant=%d\"\n      headers: {Authorization: \"Bearer ${SHARDCRON_JOB_TOKEN}\"}\n    timeout: 10s\n    misfire: run_all\n",
			i, i%60, zones[i%len(zones)], i)
	}
	return buf.Bytes()
}
