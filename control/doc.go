// Package control holds the operator actions the CLI and the HTTP API
// share: suspend and resume one job, a job's run history, and the plan of
// a scale change. `shardcron suspend`, `history` and `plan` and the
// /api/v1 endpoints call the same functions and print or serve the same
// result types, so their JSON field names are one set.
//
// Every action reads (and, for suspend and resume, writes) etcd directly;
// none needs a replica to be running, and none goes through a watch. A
// write is one guarded transaction (package jobstore); a read is one
// snapshot. Errors wrap the package's sentinels (ErrNotFound, ErrConflict,
// ErrInvalid) so that callers map them to exit codes and HTTP statuses
// without knowing the packages below.
package control

import "errors"

// Errors of the package, wrapped with the job or flag they concern.
var (
	// ErrNotFound: the cluster has no such job.
	ErrNotFound = errors.New("control: not found")
	// ErrConflict: the action contradicts the cluster's state (resume of a
	// job its jobs file suspends); nothing was changed.
	ErrConflict = errors.New("control: conflict")
	// ErrInvalid: the request itself is wrong (a bad node name, a replica
	// count below 1); nothing was read or changed.
	ErrInvalid = errors.New("control: invalid request")
)
