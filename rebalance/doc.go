// Package rebalance computes the desired owner of every shard from the list
// of live members. It is pure: no I/O, no clock, no goroutines. Assign
// remembers the last assignment it computed and answers the same inputs
// from it: building a fine ring costs tens of milliseconds at a hundred
// members.
//
// The mapping is consistent hashing with bounded loads
// (github.com/buraksezer/consistent v1.0.0, hasher
// github.com/cespare/xxhash/v2), built from the sorted, deduplicated member
// list.
//
// Invariants:
//   - Every node that sees the same member set computes the same Assignment,
//     whatever order it saw the members in.
//   - With at least one member, every shard has exactly one desired owner,
//     and no member is desired for more than ceil(S/N × LoadFactor) shards.
//   - With no members every shard is unowned; with more members than shards
//     the extra members own nothing (warm standbys).
//   - Params are validated before the library sees them, so it can never
//     panic (it panics for a load factor below 1, a nil hasher, or a ring
//     without replicas).
//
// The Assignment is advice: etcd decides who actually holds each shard
// lease (docs/design.md, "Two-level mapping").
package rebalance
