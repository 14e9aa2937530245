package jobstore

import (
	"fmt"
	"testing"

	"github.com/shardcron/shardcron/config"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// BenchmarkApply measures one apply of a set of n jobs over a current set
// of the same size where every job changed (the worst case: a new version
// of every chunk, a full diff), against embedded etcd on this machine.
// Reported besides time: the stored (compressed) bytes of one version, and
// the growth of etcd's database file per apply (old versions are deleted
// but stay in etcd's history until compaction, and the file shrinks only
// on defragmentation).
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			s := etcdtest.Start(b)
			cli := s.Client(b)
			ks := keyspace.New("bench")
			mustApply(b, cli, ks, jobs(0, n, 0), ApplyOptions{})
			before := dbSize(b, cli)
			var stored int64
			i := 0
			for b.Loop() {
				i++
				b.StopTimer()
				next := jobs(0, n, i) // what parsing the file would hand over
				b.StartTimer()
				stored = mustApply(b, cli, ks, next, ApplyOptions{}).Bytes
			}
			b.ReportMetric(float64(stored), "stored-B/version")
			b.ReportMetric(float64(dbSize(b, cli)-before)/float64(b.N), "db-growth-B/op")
		})
	}
}

// BenchmarkLoad measures a consistent read of the current set of n jobs,
// what every replica does at start and on every new version.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			s := etcdtest.Start(b)
			cli := s.Client(b)
			ks := keyspace.New("bench")
			mustApply(b, cli, ks, jobs(0, n, 0), ApplyOptions{})
			for b.Loop() {
				if set := mustLoad(b, cli, ks); len(set.Jobs) != n {
					b.Fatalf("loaded %d jobs, want %d", len(set.Jobs), n)
				}
			}
		})
	}
}

// BenchmarkApplyUnchanged measures an apply of the set already current:
// a read and a diff, nothing written.
func BenchmarkApplyUnchanged(b *testing.B) {
	const n = 100_000
	s := etcdtest.Start(b)
	cli := s.Client(b)
	ks := keyspace.New("bench")
	js := jobs(0, n, 0)
	mustApply(b, cli, ks, js, ApplyOptions{})
	for b.Loop() {
		if mustApply(b, cli, ks, js, ApplyOptions{}).Applied {
			b.Fatal("an unchanged set was applied")
		}
	}
}

// BenchmarkApplyOneEdit measures the common change, one job's schedule, on
// a set of n jobs, in format 1 (every chunk rewritten), format 2 with 1,024
// shards (the edited shard's part and a pointer listing every part) and
// format 3 (the part, the page naming it and a pointer listing pages); at
// a million jobs (config.MaxJobs) in formats 2 and 3, and in format 3 at
// keyspace.MaxShards too. Reported besides time: the bytes the apply put
// into etcd (Result.Put: keys and values of the chunks, pages, version
// reservation and pointer), and of that the changed part's stored bytes.
func BenchmarkApplyOneEdit(b *testing.B) {
	type bench struct{ n, shards, format int }
	for _, c := range []bench{
		{10_000, 0, 1}, {10_000, 1024, 2}, {10_000, 1024, 3},
		{100_000, 0, 1}, {100_000, 1024, 2}, {100_000, 1024, 3}, {100_000, keyspace.MaxShards, 3},
		{config.MaxJobs, 1024, 2}, {config.MaxJobs, 1024, 3}, {config.MaxJobs, keyspace.MaxShards, 3},
	} {
		name := fmt.Sprintf("jobs=%d/format=%d", c.n, c.format)
		if c.shards != 1024 && c.shards != 0 {
			name += fmt.Sprintf("/shards=%d", c.shards)
		}
		b.Run(name, func(b *testing.B) {
			s := etcdtest.Start(b)
			cli := s.Client(b)
			ks := keyspace.New("bench")
			set := jobs(0, c.n, 0)
			opts := ApplyOptions{Shards: c.shards, Format: c.format}
			mustApply(b, cli, ks, set, opts)
			var put, part int64
			i := 0
			for b.Loop() {
				i++
				b.StopTimer()
				set[i%c.n].Schedule = fmt.Sprintf("%d * * * * *", i%60)
				next := append([]config.Job(nil), set...)
				b.StartTimer()
				r := mustApply(b, cli, ks, next, opts)
				if !r.Applied || r.Format != c.format {
					b.Fatalf("edit %d: %+v, want a format %d version applied", i, r, c.format)
				}
				put, part = r.Put, r.Bytes
			}
			b.ReportMetric(float64(put), "put-B/op")
			b.ReportMetric(float64(part), "part-B/op")
		})
	}
}

// BenchmarkDecodePart measures decoding one stored part of 1,000 jobs
// (about a shard's at a million jobs over 1,024 shards): whole, as a
// holder of its shard does, and for an index only, as a replica does for
// every part it does not hold when it reads the set at start.
func BenchmarkDecodePart(b *testing.B) {
	set := jobs(0, 1000, 1)
	enc, err := encodeSet(set, DefaultApplyOptions().ChunkBytes, 2)
	if err != nil {
		b.Fatal(err)
	}
	if err := enc.compress(); err != nil {
		b.Fatal(err)
	}
	ref := partRef{Version: 1, Chunks: len(enc.chunks), Jobs: len(set), Digest: enc.short}
	for _, names := range []bool{false, true} {
		b.Run(fmt.Sprintf("names-only=%v", names), func(b *testing.B) {
			for b.Loop() {
				r := newPartReader(ref)
				r.names = names
				for c, z := range enc.chunks {
					if err := r.add(c, z); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := r.finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
