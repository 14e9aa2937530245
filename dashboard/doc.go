// Package dashboard serves a replica's HTTP surface: the page at /, the
// state API (/api/v1/state), the jobs API (/api/v1/jobs, paged and
// searchable), one job (/api/v1/jobs/{name}) and its page (/jobs/{name}),
// a job's run history (/api/v1/jobs/{name}/runs), the
// operator actions (POST /api/v1/jobs/{name}/trigger, /suspend and
// /resume), the event stream of ownership changes (/api/v1/events,
// server-sent events), the OpenAPI document (/api/v1/openapi.json),
// /healthz, /readyz and /metrics. Every handler is backed by a function the
// caller supplies (Config), so the package knows nothing of etcd; only the
// POST routes' functions write, and package httpauth gives them the
// operate role by their method. Routes lists what New registers; a test
// holds it equal to openapi.json.
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
//
// Bounds against load from outside: at most MaxSubscribers event streams,
// sharing one rendering of the state, and at most MaxOperate operator
// actions at once (a trigger's wait included); beyond either, 503 with
// Retry-After, never a queue. The stream and a trigger's ?wait= set their
// own connection deadlines (http.ResponseController), so the server's read
// and write timeouts can stay short for every other request.
package dashboard
