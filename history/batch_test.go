package history

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// histBatch keeps comparisons, operations and bytes within one
// transaction's limits and loses no write.
func TestHistoryBatchLimits(t *testing.T) {
	var pending []*histWrite
	for i := range 500 {
		hw := &histWrite{shard: i % 200, job: fmt.Sprintf("job-%d", i), ops: make([]clientv3.Op, 1+i%2), nbytes: 100}
		if i%97 == 0 {
			hw.nbytes = maxSegmentBytes
		}
		pending = append(pending, hw)
	}
	seen := 0
	for len(pending) > 0 {
		batch, rest := histBatch(pending)
		shards, ops, nbytes := map[int]bool{}, 0, 0
		for _, hw := range batch {
			shards[hw.shard] = true
			ops += len(hw.ops)
			nbytes += hw.nbytes
		}
		if len(batch) == 0 || len(shards) > maxTxnOps || ops > maxTxnOps || nbytes > maxTxnBytes {
			t.Fatalf("batch of %d writes: %d comparisons, %d operations, %d bytes", len(batch), len(shards), ops, nbytes)
		}
		seen += len(batch)
		pending = rest
	}
	if seen != 500 {
		t.Fatalf("%d of 500 writes batched", seen)
	}
}
