package history

import "github.com/shardcron/shardcron/scheduler"

// Transitional: the shard package still writes and reads history through
// these until the write and read paths move here.

// MaxSegmentBytes bounds one segment's value.
const MaxSegmentBytes = maxSegmentBytes

// DecodeSegment decodes a segment stored under a key carrying seq.
func DecodeSegment(seq int64, b []byte) ([]scheduler.Entry, error) { return decodeSegment(seq, b) }

// FitSegment returns the newest entries that fit one segment and their
// stored form.
func FitSegment(seq int64, entries []scheduler.Entry, keep int) ([]scheduler.Entry, []byte, error) {
	return fitSegment(seq, entries, keep)
}
