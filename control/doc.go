// Package control holds the operator actions the CLI and the HTTP API
// share: trigger one job, suspend and resume one job, drain and undrain a
// node, a job's run history, and the plan of a scale change. `shardcron
// trigger`, `suspend`, `drain`, `history` and `plan` and the /api/v1
// endpoints call the same functions and print or serve the same result
// types, so their JSON field names are one set.
//
// Every action reads (and, for trigger, suspend, resume and drain, writes)
// etcd directly; none needs a replica to be running, and none goes through
// a watch, so they work from any host that can reach etcd. A write is one
// guarded transaction (package jobstore for the job set), except the
// trigger of every item of a sharded job, written 128 items to a
// transaction (items.go); a read is one snapshot, except a sharded job's
// history, read item by item.
//
// Trigger writes a request that the owner of the job's shard runs once as
// a fenced manual tick (scheduler.Trigger); Wait follows it to its outcome
// in the job's history. A sharded job's items are units of their own
// (config.UnitName): a trigger writes one request per item, each in its
// unit's shard, under one id, and WaitItems follows them all; its history
// is summed up per tick (ItemsHistory), or read for one item. Drain and Undrain set and delete a node's drain
// flag (shard.Manager hands over every shard of a drained node and gives it
// none). Errors wrap the package's sentinels (ErrNotFound, ErrConflict,
// ErrInvalid) so that callers map them to exit codes and HTTP statuses
// without knowing the packages below.
package control

import "errors"

// Errors of the package, wrapped with the job or flag they concern.
var (
	// ErrNotFound: the cluster has no such job.
	ErrNotFound = errors.New("control: not found")
	// ErrConflict: the action contradicts the cluster's state (resume of a
	// job its jobs file suspends, a trigger of a suspended job, a drain of
	// the last member); nothing was changed.
	ErrConflict = errors.New("control: conflict")
	// ErrInvalid: the request itself is wrong (a bad node name, a replica
	// count below 1); nothing was read or changed.
	ErrInvalid = errors.New("control: invalid request")
)
