package cronspec

import (
	"fmt"
	"testing"
	"time"
)

// benchSchedules parses n schedules mixing fixed-time and interval specs,
// @every and zones with and without DST, the way a large jobs file would.
func benchSchedules(b *testing.B, n int) []Schedule {
	b.Helper()
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Tokyo"}
	out := make([]Schedule, n)
	for i := range out {
		var spec string
		switch i % 6 {
		case 0:
			spec = fmt.Sprintf("%d */10 * * * *", i%60)
		case 1:
			spec = fmt.Sprintf("%d %d * * *", i%60, i%24)
		case 2:
			spec = fmt.Sprintf("@every %ds", 1+i%3600)
		case 3:
			spec = fmt.Sprintf("0 %d %d * * mon-fri", i%60, i%24)
		case 4:
			spec = fmt.Sprintf("0 0 %d %d *", 1+i%28, 1+i%12)
		case 5:
			spec = "@hourly"
		}
		s, err := Parse(spec, zones[i%len(zones)])
		if err != nil {
			b.Fatalf("Parse(%q): %v", spec, err)
		}
		out[i] = s
	}
	return out
}

// BenchmarkNext: one Next call on one of 100,000 parsed schedules, from a
// start that walks through the year (crossing DST transitions).
//
//	go test -run '^$' -bench 'Next|Parse' -benchmem ./schedule
func BenchmarkNext(b *testing.B) {
	const n = 100_000
	scheds := benchSchedules(b, n)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		at := start.Add(time.Duration(i%8760) * time.Hour)
		if scheds[i%n].Next(at).IsZero() {
			b.Fatal("zero fire time")
		}
		i++
	}
}

// BenchmarkParse: parsing (with the never-fires check) of a typical spec in a
// DST zone.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("30 2 * * mon-fri", "Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}
