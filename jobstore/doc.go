// Package jobstore keeps the cluster's job set in etcd: versioned, applied
// atomically at any size, and watchable.
//
// # Layout (under keyspace.Space.Jobs())
//
//	jobs/seq                         written once per apply; the revision of
//	                                 that write is the new set's version
//	jobs/sets/<version>/<chunk>      format 1: immutable chunks of one
//	                                 version: gzip'd JSON {"format":1,
//	                                 "jobs":[...]}, each at most
//	                                 ApplyOptions.ChunkBytes uncompressed
//	jobs/sets/<version>/<shard>.<c>  format 2 and 3: chunk c of one shard's
//	                                 part (its jobs by name), written by the
//	                                 apply of that version and named again
//	                                 by later pointers while they are
//	                                 unchanged
//	jobs/sets/<version>/p<page>      format 3: a page, JSON {"format":3,
//	                                 "parts":[{s, v, c, j, b, d}]}, the parts
//	                                 of shards [page×K, (page+1)×K); written
//	                                 and named again like parts
//	jobs/current                     the pointer: {format, version, chunks,
//	                                 jobs, digest}; format 2 adds shards and
//	                                 parts [{s, v, c, j, b, d}]; format 3
//	                                 shards, page_shards (K) and pages
//	                                 [{p, v, n, j, d}] instead of parts
//	jobs/overrides/<job>             the job's override (suspend, resume):
//	                                 {format, suspended, changed, resumed,
//	                                 job_since}; apply never writes it
//
// Replicas watch one range, jobs/current and jobs/overrides/
// (keyspace.JobsWatchEnd), never the chunks. A watcher keeps the pages and
// parts it decoded and reads only those a new pointer names anew (pages.go,
// parts.go). A
// replica's watch (WatchHeld, held.go) keeps the jobs of the shards it
// wants and every sharded job, and of the other parts only an Index
// (index.go); ReadJobs reads a page's other definitions on demand. It
// hands the held definitions over by pointer, never changed, the same
// pointers while a part is unchanged, so its consumer (the scheduler)
// keeps them instead of a copy; decoded jobs share their common strings,
// maps and pointers (share.go). Parts newly wanted are read and delivered
// a batch at a time (Want.WaitShard says when one shard's are held).
//
// # Formats and upgrades
//
// Format 2 makes an apply cost what changed: a one-job edit writes one
// part and the pointer, and encodes only that part's jobs (planParts). Apply writes it only when its caller passes the
// shard count (ApplyOptions.Shards), which `shardcron apply` does when
// every member key says it reads format 2; otherwise format 1. A replica of
// an earlier release reads only format 1 and refuses a format 2 pointer
// (ErrFormat), keeping its last set; so during a rolling upgrade applies
// write format 1, and after a downgrade the next apply (by this release's
// CLI, which sees the older members) rewrites the set in format 1 even when
// no job changed. From format 1 to 2 an unchanged set waits for its next
// change, unless ApplyOptions.Rewrite asks (`apply --job-set-format 2`).
//
// Format 3 makes the pointer cost what changed too. A format 2 pointer
// lists every part, about 72 bytes a shard (74 KB at 1,024 shards, 4.7 MB
// at keyspace.MaxShards, past etcd's request limit), and every apply
// rewrites it. A format 3 pointer lists pages of K parts each, K the power
// of two at or above √S, copy-on-write like parts, so a one-job edit writes
// its part, the page that names it and a pointer of at most √S page refs
// (about 2.5 KB each at 1,024 shards, 20 KB at 65,536), at the cost of one
// more read round trip (the pages, then the parts). Its parts are format 2
// parts: between formats 2 and 3 only the pointer and the pages change.
// Apply writes format 3 when asked (ApplyOptions.Format 3, with Shards),
// which `shardcron apply` does when every member key says its replica
// reads format 3. A replica of 7359ad3 reads formats 1 and 2 and refuses a
// format 3 pointer (ErrFormat), keeping its last set; its CLI's apply and
// a --jobs bootstrap refuse it too, changing nothing. So while one runs,
// applies write format 2; after the upgrade the first apply that changes
// a job writes format 3 (or `apply --job-set-format 3` at once). Before a
// downgrade, `apply --job-set-format 2` rewrites the pointer in format 2,
// naming the same parts, even when no job changed; this release's CLI does
// that by itself once a format 2 member is up again.
//
// # Overrides
//
// `shardcron suspend JOB` and `resume JOB` (SetSuspended) write only the
// job's override, so they touch no other job and need no jobs file. The set
// replicas run is the effective one (Effective): a job is suspended when
// its applied definition says suspend: true or its override says suspended;
// its Resumed is the later of the two layers', so, as for an applied
// resume, no owner runs a tick that came due while either layer held it,
// and its SuspendedAt the earlier of the two layers' suspensions while
// both hold it, the latest stretch's once both have lifted it (the file's
// stamped by the apply that suspended the job, the override's by suspend;
// each kept after its resume), up to which a new owner decides the ticks
// nobody ran.
// An apply leaves overrides alone whatever the file says (the file cannot
// lift `shardcron suspend`; its diff lists the jobs kept suspended), resume
// cannot lift the file's suspend: true (ErrSuspendedByFile), and an apply
// that removes a job deletes its override with its records. An override
// carries the Since of the job it was written for and applies to no later
// job of that name.
//
// Rolling upgrade: a replica of a release before overrides reads only
// jobs/current, so it does not see `shardcron suspend`: a job suspended that
// way keeps firing on the shards such a replica owns until the upgrade
// ends. Finish the upgrade before suspending a job this way, or suspend it
// in the jobs file (suspend: true) and apply, which every release honours.
// An older release's apply does not collect overrides of jobs it removes;
// the next apply by this release does, and meanwhile they apply to nothing.
//
// # Invariants
//
//   - A job set becomes visible only through one transaction that rewrites
//     jobs/current, compare-and-swapped on the ModRevision the applier read.
//     Every chunk of the version is written before that flip, so a reader
//     that follows the pointer finds all of them (and all its pages).
//   - Readers read the chunks at the pointer's revision (clientv3.WithRev),
//     so they see exactly one version, never a mix, even while a newer
//     apply is writing or a garbage collection is deleting; the pointer's
//     job count and digest (SHA-256 of the uncompressed chunks) are checked
//     on every read, and in format 3 each page's digest (SHA-256 of the
//     stored page, 128 bits) and counts, then the parts it names as in
//     format 2.
//   - Versions increase with every flip: a version is reserved (jobs/seq)
//     after its applier read the pointer, and a flip succeeds only if no
//     other flip happened since that read. Hence a version below the current
//     one that is not current will never become current, and garbage
//     collection deletes every version below the one it just flipped to,
//     including the orphans of failed or crashed applies. In format 2 it
//     deletes every key of a lower version that the new pointer does not
//     name: a later pointer names only parts (and pages) of this one or of
//     its own version.
//   - Each job keeps Since (when its name was first applied) for as long as
//     its name stays in the set; a job that is removed and added again gets
//     a new Since.
//   - Checkpoint records (ticks/<shard>/<job>) of removed jobs are deleted
//     after the flip, each deletion guarded by the pointer still being the
//     one this apply wrote: a slow collector never deletes the record of a
//     job that a later apply brought back.
//
// # Failure model
//
// An apply that fails or crashes before its flip leaves the current set
// untouched and an orphan version, which the next successful apply
// deletes. Two concurrent applies: exactly one flips, the other gets
// ErrConflict and deletes the version it wrote. An RPC error on the flip
// itself leaves the outcome unknown; it is returned as is (not
// ErrConflict), and Load tells which set is current. Garbage collection
// after a successful flip is best effort: its failure is reported in
// Result.GCErr and repaired by the next apply.
//
// Data in a newer format than this binary knows is refused with ErrFormat
// by Load and Apply. A set that fails its checks (ErrCorrupt: a pointer or
// chunk edited or deleted by hand, a digest or job count that does not
// match) is refused by Load and Apply; Apply replaces it only with
// ApplyOptions.ReplaceCorrupt, every job then counting as new. Watch
// reports either kind (baddata.JobSet, once per pointer revision) and
// delivers nothing until a good version appears: the replica keeps its last
// good set, and no replica stops because of what every replica reads.
//
// # What etcd must provide
//
// Requests of up to 1.5 MiB and transactions of up to 128 operations
// (etcd's defaults; chunk writes use at most 1 MiB and 64). History must be
// compacted (each apply leaves its superseded version in history until
// then) and the backend defragmented now and then; a revision compacted
// under a reader only makes it read again from the newest pointer.
package jobstore
