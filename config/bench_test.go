package config

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParseJobs100k: parsing and validating a file of MaxJobs jobs, as
// apply and validate do.
//
//	go test -run '^$' -bench ParseJobs -benchmem -benchtime 3x ./config
func BenchmarkParseJobs100k(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString("jobs:\n")
	zones := []string{"UTC", "Europe/Berlin", "America/New_York"}
	for i := range MaxJobs {
		fmt.Fprintf(&buf, "  - name: tenant-%06d.sync\n    schedule: \"%d */5 * * * *\"\n    timezone: %s\n    http:\n      url: \"${SHARDCRON_JOB_SINK_URL}/sync?tenant=%d\"\n      headers: {Authorization: \"Bearer ${SHARDCRON_JOB_TOKEN}\"}\n    timeout: 10s\n    misfire: run_all\n",
			i, i%60, zones[i%len(zones)], i)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		jobs, err := ParseJobs("jobs.yaml", data)
		if err != nil || len(jobs) != MaxJobs {
			b.Fatalf("%d jobs, %v", len(jobs), err)
		}
	}
}
