// Package dashboard serves a replica's HTTP surface: the state API
// (/api/v1/state), the jobs API (/api/v1/jobs, paged), /healthz, /readyz,
// /metrics and the page at /. It reads, never writes: every handler is
// backed by a read-only function the caller supplies, so the package knows
// nothing of etcd.
//
// /healthz says the process is alive and never depends on etcd; /readyz says
// the replica's lease is valid and its claims succeed.
package dashboard
