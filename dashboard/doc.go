// Package dashboard serves a replica's HTTP surface: the page at /, the
// state API (/api/v1/state), the jobs API (/api/v1/jobs, paged and
// searchable), the event stream of ownership changes (/api/v1/events,
// server-sent events), /healthz, /readyz and /metrics. It reads, never
// writes: every handler is backed by a read-only function the caller
// supplies, so the package knows nothing of etcd.
//
// New builds the whole handler in one place, so a middleware (auth, TLS
// redirects) wraps it once.
//
// The event stream is fed by the replica's watch on own/, which every
// replica keeps anyway; run outcomes are read a page at a time through the
// jobs API, never streamed. What the page and the APIs show never includes
// a job's target, headers or environment, where secrets live.
//
// /healthz says the process is alive and never depends on etcd; /readyz says
// the replica's lease is valid and its claims succeed.
package dashboard
