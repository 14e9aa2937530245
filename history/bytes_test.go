package history

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/scheduler"
)

// TestHistoryBytesPerEntry logs what run history costs etcd: key and value
// bytes of the puts AppendHistory sends (the exact operations plan builds),
// per entry (a deleted segment leaves only a tombstone of its key), for a
// per-second job whose history is flushed every 1, 3, 5 or 10 seconds, with
// typical entries (cluster "prod", a 19-character job name, a 9-digit
// token, detail "HTTP 200"), without and with 100 bytes of output. It
// asserts only the encoding's own bound; the figures go to BENCHMARKS.md.
func TestHistoryBytesPerEntry(t *testing.T) {
	wr := &Writer{ks: keyspace.New("prod")}
	const keep, jobs, flushes = 20, 50, 40
	for _, output := range []string{"", fmt.Sprintf("%-100s", `{"swept":1234,"status":"ok"}`)} {
		for _, per := range []int{1, 3, 5, 10} {
			wr.hist = histCache{}
			tick := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
			put, entries, deletes := 0, 0, 0
			for f := range flushes {
				for j := range jobs {
					ents := make([]scheduler.Entry, per)
					for k := range ents {
						tk := tick.Add(time.Duration(f*per+k) * time.Second)
						ents[k] = scheduler.Entry{Tick: tk, Start: tk.Add(2*time.Millisecond + 345*time.Microsecond), End: tk.Add(41*time.Millisecond + 678*time.Microsecond),
							Status: scheduler.StatusSucceeded, Detail: "HTTP 200", Node: "node-1", Token: 123456789, Output: output}
					}
					hw := &histWrite{shard: 417, token: 123456789, job: fmt.Sprintf("invoice-sweep-%05d", j), ents: ents}
					now := tick.Add(time.Duration((f+1)*per)*time.Second + 300*time.Millisecond).UnixNano()
					if err := wr.plan(hw, keep, now); err != nil {
						t.Fatal(err)
					}
					for _, op := range hw.ops {
						if op.IsPut() {
							put += len(op.KeyBytes()) + len(op.ValueBytes())
						} else if op.IsDelete() {
							deletes++
						}
					}
					entries += per
					wr.hist.setJob(hw.shard, hw.token, hw.job, hw.segs)
				}
			}
			perEntry := float64(put) / float64(entries)
			t.Logf("output %3d B, %2d entries per segment: %6.1f bytes put per entry, %.2f puts and %.2f DeleteRange ops per entry",
				len(output), per, perEntry, 1/float64(per), float64(deletes)/float64(entries))
			if output == "" && per >= 3 && perEntry > 120 {
				t.Errorf("%.1f bytes per typical entry at %d per segment, budget 120", perEntry, per)
			}
		}
	}
	_ = clientv3.OpPut // the ops above are clientv3.Op
}
