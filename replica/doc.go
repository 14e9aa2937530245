// Package replica is one replica's lifetime: it builds the runner, the
// shard Manager, the scheduler, the job-set watch and the HTTP surface,
// starts them in order, and stops them in the reverse order. It also owns
// the jobs read model the API and the CLI share (JobView, ReadStatus), so
// `status` and /api/v1/jobs show a job the same way; run history and the
// other operator actions are package control's, for the CLI and the API
// alike.
//
// New checks the Config and builds what needs no etcd; it starts nothing.
// Run owns every lifetime, once:
//
//  1. HTTP serves from the start, before anything asks etcd: /healthz says
//     the process is alive and never depends on etcd, so a liveness probe
//     gets its answer while etcd is unreachable; every other path answers
//     503 (not ready) until the replica is wired.
//  2. The cluster's meta is read, or created on a new cluster (its shard
//     count wins over Config.Shards). Run says so while etcd does not
//     answer rather than waiting silently; a meta it must refuse (newer,
//     rewritten, missing while members run) holds it there, not ready and
//     saying why, until the meta is fixed, rather than exiting into a
//     crash loop.
//  3. The Manager and the scheduler are built (the scheduler writes through
//     the Manager's Store; the Manager hands ownership events to the
//     scheduler once it runs), the job set is bootstrapped from
//     Config.Jobs when the cluster has none, and the dashboard replaces the
//     starting handler.
//  4. The scheduler and the job-set watch start, then the Manager, but
//     only once the watch delivered a job set (firstset.go): a replica that
//     cannot read the cluster's job set takes no shards and is not ready.
//     The watch holds the jobs of the shards the replica owns or is
//     acquiring, and an index of the rest (catalog.go); the Manager hands
//     grants to the scheduler through holder.go, which has the shard's
//     jobs read first and lets them go only once the shard is released.
//
// Shutdown, when ctx ends or a part fails, is the reverse:
//
//  1. The Manager leaves first: its member key goes, every shard is drained
//     through the scheduler (Handler.Drain, bounded by DrainTimeout) and
//     released, and its lease is revoked.
//  2. The scheduler and the job-set watch outlive it, under a context of
//     their own that is cancelled only after the Manager has returned, so
//     a drain always finds the scheduler running.
//  3. HTTP stops last (requests in flight, the event stream above all, end
//     with it), so /healthz answers until the replica is gone.
//  4. The runner is closed: any run still going is stopped in an orderly
//     way.
//
// Run returns when every goroutine it started has ended. It returns nil
// when ctx ended and the replica left, or the first error of a part (the
// Manager's fatal error such as a duplicate node id, the scheduler's, the
// job watch's, HTTP's); a failed part takes the replica out of the cluster
// in the same order.
//
// The HTTP server is bounded whatever the caller wraps it with (conns.go):
// read, write and idle timeouts, a header limit, at most MaxConns
// connections (at the cap the one idle longest makes room), and every
// write a browser marks as cross-origin refused (http.CrossOriginProtection),
// whatever its credentials. What the bounds refuse is counted by
// shardcron_http_refused_total.
package replica
