package rebalance

import "errors"

// Errors of the package.
var (
	// ErrInvalidConfig: Params fail validation.
	ErrInvalidConfig = errors.New("rebalance: invalid parameters")
	// ErrShard: a shard number out of [0, Shards).
	ErrShard = errors.New("rebalance: shard out of range")
)
