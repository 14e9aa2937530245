// Package config is the job model: the Job type and the jobs file users
// write (ParseJobs, LoadJobs, MarshalJobs), with its JSON Schema. A replica's
// own settings (flags, environment, --config file) are package
// config/settings, which reads its file with this package's strict YAML
// (DecodeFile) and reports problems as its Errors; nothing here parses flags,
// so the scheduler, which holds jobs, imports no flag package.
//
// The jobs file is strict. A typo must never become a job that silently does
// not run, so unknown fields, duplicate keys (also inside headers and env),
// values of the wrong type, tabs in indentation, text that is not UTF-8,
// anchors and aliases, files over MaxFileSize (512 MiB), more than MaxJobs
// (1,000,000) jobs, bad or duplicate names, cron specs that are malformed or
// never fire, TZ= prefixes, unknown time zones, negative or absurd durations,
// a schedule beside a one-shot at (or neither), timestamps that are not RFC
// 3339, an end_at before its start_at, max_runs below 1, a jitter that is
// not whole seconds or exceeds the schedule's shortest gap,
// a missing or second run target, bad URLs and ${NAME} references outside
// SHARDCRON_JOB_* are all errors.
//
// A file laid out as usual (a top-level "jobs:" line, its entries each
// starting with a dash at one indentation) is parsed an entry at a time
// (jobsplit.go), so a million jobs never make one YAML node tree; any other
// layout, and any file with a YAML problem, is parsed whole, with the same
// results and messages.
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
// this package panics, exits or reads the environment: Expand is given its
// lookup.
package config
