package keyspace

import (
	"fmt"
	"strconv"
	"strings"
)

// Run history lives under runs/, apart from ticks/, so that the per-fire
// checkpoint stays small and a shard's acquisition (one ranged Get of
// ticks/<shard>/) never reads history. Nobody watches runs/.
//
//	runs/<shard, zero-padded>/<job>/<seq>-<count>
//
// Each key is one segment: the entries one history flush appended for one
// job (history.Writer), append-only, written under the shard's fence.
// seq is 16 lower-case hex digits, a strictly increasing unix-nanosecond
// stamp per job (the flush time, or the previous segment's seq + 1 when the
// clock is behind it), so keys sort by time and one DeleteRange from the
// job's prefix up to the oldest kept segment drops every older one. count
// is the number of entries in the segment (decimal), so retention is
// decided from a keys-only read. Job names contain no "/", so one job's
// prefix never covers another job's segments.

const seqWidth = 16

// Runs is the prefix of every shard's run history.
func (s Space) Runs() string { return s.root + "runs/" }

// ShardRuns is the prefix of shard's run history.
func (s Space) ShardRuns(shard int) string { return s.Runs() + pad(shard) + "/" }

// JobRuns is the prefix of job's history segments in shard.
func (s Space) JobRuns(shard int, job string) string { return s.ShardRuns(shard) + job + "/" }

// RunSegment is the key of one history segment of job: seq orders it
// (unix nanoseconds, never negative) and count is its number of entries.
func (s Space) RunSegment(shard int, job string, seq int64, count int) string {
	return fmt.Sprintf("%s%0*x-%d", s.JobRuns(shard, job), seqWidth, seq, count)
}

// RunSegmentFromKey parses a history segment key.
func (s Space) RunSegmentFromKey(key string) (shard int, job string, seq int64, count int, ok bool) {
	rest, found := strings.CutPrefix(key, s.Runs())
	if !found || len(rest) < shardWidth+2 || rest[shardWidth] != '/' {
		return 0, "", 0, 0, false
	}
	shard, err := strconv.Atoi(rest[:shardWidth])
	if err != nil || shard < 0 {
		return 0, "", 0, 0, false
	}
	rest = rest[shardWidth+1:]
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return 0, "", 0, 0, false
	}
	job, tail := rest[:slash], rest[slash+1:]
	if len(tail) < seqWidth+2 || tail[seqWidth] != '-' {
		return 0, "", 0, 0, false
	}
	u, err := strconv.ParseUint(tail[:seqWidth], 16, 63)
	if err != nil {
		return 0, "", 0, 0, false
	}
	count, err = strconv.Atoi(tail[seqWidth+1:])
	if err != nil || count < 1 {
		return 0, "", 0, 0, false
	}
	return shard, job, int64(u), count, true
}
