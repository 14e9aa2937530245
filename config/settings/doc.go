// Package settings reads a replica's settings and those of every client
// command: one table (nodeflags.go) with one precedence, flag > environment
// SHARDCRON_<FLAG> > --config file > default, an empty variable counting as
// unset. `server` takes every setting (Node: ResolveNode, BindNodeFlags); the
// client commands take the Shared ones, the cluster and the way to etcd
// (Client: ResolveClient, BindClientFlags), and read the same --config file.
//
// A setting that configures a library package defaults to that package's
// constant (lease.DefaultTTL, shard.DefaultDrainTimeout, ...), so a setting
// left alone means what the library means by it. The --config file is strict YAML read by
// config.DecodeFile, as the jobs file is.
//
// Failure model: resolving reports every problem, not the first, as
// config.Errors, each naming where the bad value was written: "flag
// --lease-ttl: ...", "environment SHARDCRON_LEASE_TTL: ...", or
// `node.yaml:3: field "lease_ttl": ...` (provenance.go); each wraps
// config.ErrInvalid. Nothing here panics or exits, and the environment is
// read only through the function ResolveNode and ResolveClient are given.
package settings
