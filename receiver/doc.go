// Package receiver is the receiver's half of shardcron's exactly-once: what
// a system that receives shardcron's runs does so that each tick takes
// effect once (docs/receiver.md).
//
// shardcron runs every tick at least once and marks every possible re-run;
// every run carries an idempotency key (cluster, job, item, tick; the item
// of a sharded job, empty otherwise) and the fencing token of the shard
// lease it was claimed under. A receiver keeps two
// rules:
//
//  1. The token rule. For each (cluster, shard) keep the highest token seen;
//     reject a run whose token is lower: it comes from a deposed owner
//     acting late, after a pause or a partition. Tokens are compared only
//     within one (cluster, shard).
//  2. The key rule. Apply each key once; a repeat (a re-run whose first run's
//     effect landed) is dropped and answered as a success.
//
// Both rules are one step, Store.Admit: it compares and raises the shard's
// highest token, then records the key, and says what to do with the run
// (Accept, Repeat, Pending or Stale). The token rule comes first, so a
// stale repeat is Stale. An accepted run is then finished: Complete keeps
// the key with the effect's status (replayed to repeats), Forget drops it
// when the effect did not take place, so the next delivery applies it.
// Middleware does all of this for a net/http handler, Exec for an exec
// job's process; the state is a Memory or an SQL store.
//
// # What "atomic" means
//
// For every Store, Admit is linearizable: of concurrent deliveries of one
// key exactly one is accepted, and a token is never accepted after a higher
// one of its shard was. What Admit cannot make atomic is the effect itself,
// which happens after it, in the caller's own system:
//
//   - Memory: one mutex guards both maps. Admit records the key as pending
//     before the effect; a delivery of the key while it is pending gets
//     Pending (answer "try later"; after MemoryConfig.Pending the key is
//     taken over, as a hung handler's must be), one after Complete gets
//     Repeat. State
//     lives and dies with the process: a restarted receiver forgets every
//     key and token, so use Memory where the effect dies with the process
//     too (a ledger, a cache), or accept that repeats across a restart are
//     applied again.
//   - SQL, through Admit: one database transaction compares and raises the
//     shard's token row (a conditional UPDATE, which also locks that row
//     until commit, so decisions of one shard are serialized) and inserts
//     the key as pending; it commits before the effect. A crash between
//     that commit and Complete leaves the key pending: after
//     SQLConfig.Pending it is taken over by the next delivery. The effect
//     and the key are two commits, so an effect that landed and crashed
//     before Complete can be applied twice.
//   - SQL, through AdmitTx: the same statements in the caller's own
//     transaction, the key recorded as done. When the effect is written to
//     the same database in that transaction, the comparison, the key and
//     the effect commit or roll back together: exactly once, with no
//     window. This is the mode to use when the effect is a database write.
//
// # What is not guaranteed
//
// Keys are kept for a retention (Memory forgets them itself, SQL by Prune):
// a repeat arriving later than that is applied again. Tokens start again
// from low values if shardcron's etcd is restored from a backup without
// --bump-revision; every run is then Stale until the receiver's token rows
// are cleared. A run without identity headers (not from shardcron) is
// refused by Middleware with 400.
package receiver
