package shard

import "errors"

// Errors of the package, checked with errors.Is.
var (
	// ErrFormat: stored data this build refuses: the cluster's meta in a
	// newer format, with parameters this build cannot serve, or rewritten
	// after its creation. (A history segment: history.ErrFormat.)
	ErrFormat = errors.New("shard: unsupported format")
	// ErrInvalidConfig: a bad Config, or a missing client or Handler.
	ErrInvalidConfig = errors.New("shard: invalid config")
	// ErrDuplicateNode: another live replica holds this node id's member
	// key for longer than one lease TTL. Node ids must be unique.
	ErrDuplicateNode = errors.New("shard: node id in use by a live replica")
	// ErrNoSpace: etcd raised its NOSPACE alarm or refused a write for
	// lack of space; the node is not ready.
	ErrNoSpace = errors.New("shard: etcd out of space")
	// ErrNotReady: the node's session is not valid (starting, or lost and
	// being replaced).
	ErrNotReady = errors.New("shard: no valid session")
	// ErrNoMeta: the cluster has no meta key yet (no replica has started).
	ErrNoMeta = errors.New("shard: cluster has no meta (no replica has started)")
)
