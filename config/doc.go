// Package config reads what users write: the jobs file (ParseJobs, LoadJobs,
// MarshalJobs) and the settings of every command: one table (nodeflags.go)
// with one precedence, flag > environment SHARDCRON_<FLAG> > --config file >
// default, an empty variable counting as unset. `server` takes every setting
// (Node: ResolveNode, BindNodeFlags); the client commands take the Shared
// ones, the cluster and the way to etcd (Client: ResolveClient,
// BindClientFlags), and read the same --config file.
//
// The jobs file is strict. A typo must never become a job that silently does
// not run, so unknown fields, duplicate keys (also inside headers and env),
// values of the wrong type, tabs in indentation, text that is not UTF-8,
// anchors and aliases, files over MaxFileSize (64 MiB), more than MaxJobs
// (100,000) jobs, bad or duplicate names, cron specs that are malformed or
// never fire, TZ= prefixes, unknown time zones, negative or absurd durations,
// a schedule beside a one-shot at (or neither), timestamps that are not RFC
// 3339, an end_at before its start_at, max_runs below 1, a jitter that is
// not whole seconds or exceeds the schedule's shortest gap,
// a missing or second run target, bad URLs and ${NAME} references outside
// SHARDCRON_JOB_* are all errors.
//
// Failure model: parsing never stops at the first problem and never returns
// part of a file. It returns every job or none, and then an Errors value
// listing every problem (up to MaxErrors), each as
//
//	jobs.yaml:12: job "invoice-sweep": field "misfire": must be one of skip, run_once, run_all
//
// Each *Error wraps ErrInvalid and, where there is one, its cause (such as
// schedule.ErrNeverFires), for errors.Is.
//
// Invariants: a job ParseJobs returns has its defaults set (SetDefaults) and
// passes Validate; MarshalJobs of it parses back to the same job. Nothing in
// this package panics or exits, and nothing here reads the environment except
// ResolveNode and ResolveClient through the function they are given.
package config
