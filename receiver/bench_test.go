package receiver

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchAdmit admits and completes a new key per operation, from parallel
// goroutines, over 64 shards: what a receiver pays per run.
func benchAdmit(b *testing.B, s Store) {
	ctx := context.Background()
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			d := Delivery{Cluster: "c", Job: "job-" + strconv.FormatInt(i%1000, 10), Tick: tick0.Add(time.Duration(i) * time.Second), Shard: int(i % 64), Token: 1}
			dec, err := s.Admit(ctx, d)
			if err != nil || dec.Verdict != Accept {
				b.Fatalf("%+v, %v", dec, err)
			}
			if err := s.Complete(ctx, d.Key(), 200); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMemoryAdmit(b *testing.B) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	benchAdmit(b, m)
}

func BenchmarkSQLiteAdmit(b *testing.B) {
	db := openSQLite(b)
	s, err := NewSQL(db, SQLConfig{})
	if err != nil {
		b.Fatal(err)
	}
	benchAdmit(b, s)
}
