// Package httpauth guards a replica's HTTP surface with bearer tokens in
// two roles: read (the page, state, jobs, history, the event stream) and
// operate (every request that is not a GET or HEAD: trigger, suspend,
// resume, drain, and whatever write endpoint is added later, with no change
// here). Operate includes read. The role a request needs follows from its
// method and path alone (Required), so an endpoint added without thought is
// guarded by default, never open by default.
//
// A token is presented as `Authorization: Bearer TOKEN`; a read may also
// present it as the password of HTTP Basic auth (any user name), which is
// what a browser sends after its login prompt: the page and the reads it
// makes then work without the page knowing about tokens. A write needs the
// bearer header: a browser replays Basic credentials by itself, whichever
// page asked, so they would let any site the operator visits write.
// (The replica also refuses every cross-origin write a browser marks as
// such, whatever its credentials; see package replica.) /healthz, /readyz
// and /metrics may be left open (the default; probes and scrapers often
// carry no credentials) or protected like the rest.
//
// HostCheck guards a listener without tokens against DNS rebinding: it
// answers only Host names no other site can point at it (localhost, IP
// addresses, its own name).
//
// Guarantees: tokens are compared in constant time (the comparison's time
// does not depend on where a guess first differs, nor on which configured
// token matched: every token is compared, via SHA-256 digests of equal
// length). A refusal is counted (shardcron_http_auth_failures_total by
// reason) and logged without the presented token, at most one log line a
// second with a count of those suppressed. No token value is ever logged,
// put into an error or exported as a metric.
//
// Not guaranteed: confidentiality of tokens on the wire without TLS (serve
// with --http-tls-cert/--http-tls-key off loopback), rate limiting of
// guesses (tokens are at least 16 characters; use long random ones), and
// token reload without a restart.
package httpauth
