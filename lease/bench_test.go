package lease

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// BenchmarkAcquireRelease1024 acquires 1,024 shards one by one (Acquire is
// one transaction per shard) and releases them, either in one batched
// Release call (64 shards per transaction) or with one Release call per
// shard. One op is the whole cycle of 1,024 shards.
func BenchmarkAcquireRelease1024(b *testing.B) {
	const n = 1024
	for _, mode := range []string{"batched", "one_by_one"} {
		b.Run(mode, func(b *testing.B) {
			cli := etcdtest.Start(b).Client(b)
			s := newSession(b, cli, Config{TTL: 10 * time.Second})
			ctx := tctx(b)
			rs := make([]Release, n)
			var acquire, release time.Duration
			for b.Loop() {
				t0 := time.Now()
				for i := range rs {
					tok, _, err := s.Acquire(ctx, i, "bench")
					if err != nil {
						b.Fatal(err)
					}
					rs[i] = Release{Token: tok, StoppedAt: time.Now()}
				}
				t1 := time.Now()
				if mode == "batched" {
					if _, err := s.Release(ctx, rs); err != nil {
						b.Fatal(err)
					}
				} else {
					for i := range rs {
						if _, err := s.Release(ctx, rs[i:i+1]); err != nil {
							b.Fatal(err)
						}
					}
				}
				acquire += t1.Sub(t0)
				release += time.Since(t1)
			}
			b.ReportMetric(float64(n*b.N)/acquire.Seconds(), "acquires/s")
			b.ReportMetric(float64(n*b.N)/release.Seconds(), "releases/s")
		})
	}
}
