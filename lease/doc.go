// Package lease is shardcron's node session and its shard leases, the only
// package that touches etcd leases.
//
// A Session is one etcd lease per node. Its own goroutine renews it with
// KeepAliveOnce every TTL/3 (each attempt abandoned after TTL/6, retried
// every TTL/10 after a failure). The session keeps a safe deadline:
//
//	deadline = sent_at(last successful renewal) + granted TTL − Margin
//
// measured on CLOCK_BOOTTIME, which keeps counting while the host is
// suspended (Go's monotonic clock does not). etcd cannot expire the lease
// before sent_at + TTL: it received the renewal after it was sent. So, up to
// the clock-rate difference that Margin covers, the deadline passes before
// etcd can expire the lease, and a node that stops acting at its deadline
// has stopped before anyone else can acquire its shards.
//
// Invariants:
//
//   - Valid() is true only before the deadline of a live session. It reads
//     the clock synchronously; callers check it right before every
//     externally visible action and every write, and this package does so
//     before each of its own writes.
//   - Once the deadline passes the session is lost for good: Done closes,
//     Context is cancelled with cause ErrLost, and a renewal that lands late
//     (sent in time, answered after the deadline) is ignored. The lease is
//     then revoked in the background until etcd confirms or reports it
//     gone; the caller starts a new Session, with new generations.
//   - A shard lease is the key own/shards/<shard>, attached to the session's
//     lease and created by a transaction on CreateRevision == 0. Its
//     CreateRevision is the generation: etcd's revision is global and
//     monotonic, so each acquisition of a shard gets a strictly larger
//     generation than every earlier one. Token{Shard, Generation} is the
//     fencing token, and Guard(token) the comparison every owner write puts
//     in its transaction. A guard that failed once fails forever.
//   - A release deletes the shard key and writes ticks/<shard>/_released in
//     one transaction under the guard, so the successor can acquire only
//     after the marker exists.
//
// Failure model. The deadline is safe as long as the node's CLOCK_BOOTTIME
// and etcd's clock run at rates within Margin per TTL of each other. A
// process paused past its deadline wakes with Valid() false, whatever
// goroutine runs first. An etcd leader change only extends leases (the new
// leader's lessor adds an election timeout), so it can cost a session (its
// renewals fail until the election ends) but never make it unsafe. What the
// package does not guarantee: that a write already sent before the deadline
// lands before it (the guard decides), or that work outside etcd stops on
// time (callers fence it with the token, and receivers compare tokens).
package lease
