package history

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Retention: every write of a job's new segment also deletes, in the same
// fenced transaction, the job's segments no longer needed to keep the
// newest keep entries. Nothing else deletes history of a job that exists,
// so a job keeps its history while its name stays (a removed job's history
// goes with the job set's garbage collection, stray.go).

// plan builds hw's put of one new segment and, when older segments are no
// longer needed to keep keep entries, the DeleteRange that drops them. A
// job so stores at most about keep + keep/4 + one flush's entries.
func (wr *Writer) plan(hw *histWrite, keep int, now int64) error {
	ks := wr.ks
	old, _ := wr.hist.jobSegs(hw.shard, hw.token, hw.job)
	seq := now
	if len(old) > 0 {
		seq = max(seq, old[len(old)-1].seq+1)
	}
	ents, val, err := fitSegment(seq, hw.ents, keep)
	if err != nil {
		return fmt.Errorf("history: encode history of job %s: %w", hw.job, err)
	}
	key := ks.RunSegment(hw.shard, hw.job, seq, len(ents))
	hw.ops = []clientv3.Op{clientv3.OpPut(key, string(val))}
	hw.nbytes = len(key) + len(val)
	segs := append(append([]histSeg(nil), old...), histSeg{seq: seq, n: int64(len(ents))})
	// The oldest segment still needed: walking back from the newest until
	// keep entries are covered.
	first, sum := len(segs)-1, int64(0)
	for ; first > 0; first-- {
		if sum += segs[first].n; sum >= int64(keep) {
			break
		}
	}
	// Delete only once the droppable entries reach a quarter of keep, so a
	// job with one entry per flush pays one DeleteRange per several flushes,
	// not one per flush (fewer operations per transaction).
	var drop int64
	for _, sg := range segs[:first] {
		drop += sg.n
	}
	if first > 0 && drop >= int64(max(1, keep/4)) {
		from := ks.JobRuns(hw.shard, hw.job)
		to := ks.RunSegment(hw.shard, hw.job, segs[first].seq, int(segs[first].n))
		hw.ops = append(hw.ops, clientv3.OpDelete(from, clientv3.WithRange(to)))
		hw.nbytes += len(from) + len(to)
		segs = segs[first:]
	}
	hw.segs = segs
	return nil
}
