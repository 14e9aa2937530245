// Package shard keeps every shard owned by exactly one live replica.
//
// A Manager runs one node's side of it: a lease.Session, the node's member
// key under own/members/, one watch on own/ (plus a periodic linearizable
// re-read), and a level-triggered reconcile loop that compares the desired
// assignment (rebalance.Assign over the settled members) with what etcd
// says is held, then acquires desired free shards, releases undesired ones
// (Handler.Drain, then a batched lease.Release) and takes orphans. It also
// implements scheduler.Store, the fenced writes of job records. Run
// history is the history package's: the Manager exposes its fence to it
// (Holds, FencedTxn, FenceFailed; fence.go), and its Store offers the
// scheduler a history.Writer on that fence as scheduler.History. It
// hands trigger requests of the shards it holds to a Handler that takes
// them (trigger.go), and counts a member with a drain flag as absent
// (drain.go).
//
// Invariants:
//   - This node acts for a shard only under a token its own Acquire
//     returned in its current session. Ownership is never inferred from a
//     node name: a key carrying this node's name but another generation
//     (an earlier session's) is someone else's.
//   - A Grant's Lost context is cancelled before the shard is released, and
//     the instant the session's safe deadline passes (cause
//     scheduler.ErrDeadline) or a fenced write finds the shard lost (cause
//     scheduler.ErrShardLost). So at no instant do two nodes both hold a
//     live Grant on one shard, as long as the lease package's deadline
//     holds (see lease's failure model).
//   - Every Store transaction is guarded by the shard's token (lease.Guard)
//     and each record's ModRevision, and is sent only after the session's
//     Valid() was checked synchronously.
//   - Joins count after Config.SettleDelay, departures at once. Joins each
//     seen within the settle delay of the previous count together, so a
//     scale-up moves each shard at most once; a member once counted stays
//     counted until its key goes (a later join never un-counts it). A shard
//     free for k × Config.OrphanAfter may be taken by the k-th member of its
//     preference list. It stays there while its desired owner is the same
//     member incarnation that left it free, and moves to its desired owner by
//     an ordinary release once that changes (the membership changed, or the
//     desired owner re-registered after a restart).
//   - An Acquire whose reply was lost (a timeout after etcd applied it)
//     leaves a shard key on this session's lease that nothing holds; a
//     linearizable read confirms it and the shard is granted under that
//     key's generation, which is the one that Acquire produced.
//
// Failure model. A node that cannot reach etcd stops acting at its safe
// deadline (every Grant's Lost is done), starts a new session when etcd is
// back, and rejoins with new, larger tokens. A crashed node's shards are
// free when etcd expires its lease (TTL after its last renewal) and are
// taken by their new desired owners as soon as the watch reports it. The
// Manager never panics and never exits the process; Run returns an error
// only for faults an operator must fix (a duplicate node id). Data under
// the cluster's prefix that its own writers never produce (a key that does
// not decode, has no owner or no lease, a changed meta) is reported to
// Config.BadData and handled by a rule per kind (baddata.go, metaguard.go):
// never a crash, never an overwrite without that report.
//
// Concurrency: one goroutine (Run's) owns the reconcile state. Acquisitions
// and drains run on worker goroutines that Run joins before it returns.
// Handler.Acquired and Handler.Drain may be called concurrently for
// different shards, never for the same shard at once, and Drain only after
// Acquired returned for that Grant. Store, State, Ready and Meta are safe
// for concurrent use.
package shard
