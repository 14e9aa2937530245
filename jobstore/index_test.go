package jobstore

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// indexOf indexes js as a watch that holds none of their parts would.
func indexOf(js []config.Job, shards int) *Index {
	bySh := map[int][]config.Job{}
	for _, j := range js {
		s := keyspace.ShardOf(j.Name, shards)
		bySh[s] = append(bySh[s], j)
	}
	cache := partCache{}
	for s, part := range bySh {
		slices.SortFunc(part, func(a, b config.Job) int { return strings.Compare(a.Name, b.Name) })
		cache[s] = newPartIndex(partRef{Shard: s, Version: 1}, part, shards, false)
	}
	return newIndex(cache, shards, 1, 1, nil)
}

// The index pages, counts and finds like a sorted list of every job.
func TestIndexSelectAndLookup(t *testing.T) {
	js := jobs(0, 3000, 1)
	js[17].Items = 4
	x := indexOf(js, 64)
	if x.Len() != len(js) || x.Held(keyspace.ShardOf(js[0].Name, 64)) {
		t.Fatalf("Len %d, want %d, and no part held", x.Len(), len(js))
	}
	page, total := x.Select("job-00001", -1, 3, 4) // job-0000100..199 and job-0000010..19, job-0000001
	var want []string
	for _, j := range js {
		if strings.Contains(j.Name, "job-00001") {
			want = append(want, j.Name)
		}
	}
	slices.Sort(want)
	if total != len(want) || len(page) != 4 || page[0].Name != want[3] || page[3].Name != want[6] {
		t.Fatalf("Select(q, offset 3, limit 4) = %v of %d, want %v of %d", page, total, want[3:7], len(want))
	}
	s := keyspace.ShardOf(js[5].Name, 64)
	page, total = x.Select("", s, 0, 1000)
	for _, e := range page {
		if e.Shard != s {
			t.Fatalf("shard filter %d let through %+v", s, e)
		}
	}
	if total == 0 || len(page) != total {
		t.Fatalf("shard %d: %d of %d", s, len(page), total)
	}
	if e, ok := x.Lookup(js[17].Name); !ok || e.Items != 4 || e.Shard != keyspace.ShardOf(js[17].Name+":0", 64) {
		t.Fatalf("Lookup(sharded) = %+v, %v", e, ok)
	}
}

// BenchmarkIndexBytesPerJob measures what a replica keeps of a job it
// does not hold: its index entry, paged once (sorted).
func BenchmarkIndexBytesPerJob(b *testing.B) {
	const n, shards = 100_000, 1024
	js := make([]config.Job, n)
	for i := range js {
		js[i] = config.Job{Name: fmt.Sprintf("job-%07d", i)}
	}
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := indexOf(js, shards)
		x.Select("", -1, 0, 1)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/job")
		runtime.KeepAlive(x)
	}
}
