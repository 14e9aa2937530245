// Package history keeps the run history of every job: what each tick did
// (its start, end, status, detail, output, node and token), written off
// the per-fire write path and read back for display (`status`, `history`,
// the jobs API, a trigger's outcome).
//
// Segments. A job's history is a series of append-only segments under
// runs/<shard>/<job>/ (keyspace.RunSegment): one key per flush of that
// job, named by a per-job increasing seq (unix nanoseconds) and the number
// of entries it holds, so that retention and readers need only the keys.
// The key layout is keyspace's; nobody watches runs/.
//
// Codec (codec.go). A segment's value is compact JSON: times relative to
// the seq in the key, to the millisecond (ticks exactly), the node and
// token stored once per segment, short status codes; detail and output
// bounded, a segment at most 256 KiB. It carries a format version; a
// reader skips a segment of a newer format rather than fail a page.
//
// Flush (write.go). The scheduler hands a Writer, as scheduler.History,
// the new entries of many jobs every few seconds. Each job's entries of
// one call become one segment, and the segments of many jobs go out in
// as few transactions as etcd's limits allow (128 comparisons, 128
// operations per branch, 1 MiB of puts), each guarded by the fences of the
// shards it writes (lease.Guard). Ownership is not decided here: the
// Writer asks its Fence (the shard package's Manager) whether a token is
// held live and sends through it, so a write is checked against the same
// session and safe deadline as the Store's fenced writes.
//
// Retention (retention.go). The transaction that puts a job's new segment
// also deletes, with one DeleteRange, the job's segments no longer needed
// to keep the newest keep entries, once they add up to a quarter of keep;
// a job so stores at most about keep + keep/4 + one flush's entries. A job
// removed from the job set loses its history with its record (Stray, run
// by the job store's garbage collection).
//
// Read (read.go). Read returns each job's newest entries, newest first,
// from one snapshot (every transaction at the first one's revision),
// never under a fence. A job with no segments shows the history its
// checkpoint record carries when a replica of the release before segments
// wrote it.
//
// Guarantees:
//   - A segment is put only while its shard's token holds in etcd (the
//     shard key's CreateRevision equals it) and only while this node holds
//     that token live with a valid session, checked synchronously before
//     the transaction is sent; a write under any other token writes
//     nothing and is refused with scheduler.ErrShardLost.
//   - Each AppendHistory call returns one error per write: nil (stored),
//     ErrShardLost (refused, the shard is lost and its Grant ended), or
//     ErrUnknown (an RPC error: it may or may not have landed).
//   - Calls are serialised: two calls never race on one job's segments,
//     and a job's seqs only grow, so entries read back in the order they
//     were written.
//   - After a successful write at least the newest keep entries of the
//     job are stored.
//
// Failure model. History is best effort within its bounds: an owner that
// dies loses the entries it had not flushed yet (at most one flush
// period, scheduler.DefaultHistoryFlush, and the scheduler's waits for the
// middle of a second and the end of a burst), and a write whose outcome is
// unknown may leave its segment or not (the Writer forgets what it knew
// of the job and learns its segments again from etcd). A segment that
// does not decode is left out of what Read returns and reported to the
// ReportTo Reporter once; retention deletes it in its turn. A Writer never
// panics and never retries a write whose fence failed.
//
// Concurrency: a Writer is safe for concurrent use; Read may be called
// from any goroutine.
package history
