// Package e2e is shardcron's end-to-end suite on Docker: `make e2e` builds
// the images (FROM scratch, see deploy/docker) and runs the tests here, which
// carry the build tag e2e so that `go test ./...` never runs them.
//
// The suite drives the docker CLI directly. Each run names everything it
// creates with a unique prefix and a label, on two private networks of its
// own: one for etcd (three members) and one for the ledger, a fencing-aware
// sink in its own container (e2e/ledger). Replicas join both, so a replica
// can be cut off from etcd alone while it still reaches the ledger. The
// suite reads ownership from etcd and fires from the ledger, from the host,
// over the containers' addresses on those networks; nothing else is
// contacted. Every scenario checks the ledger against docs/design.md ("What works
// means") and prints its figures; containers, networks and volumes are
// removed when the test ends, failed or not, and leftovers of an earlier run
// that could not clean up are removed first. Concurrent runs against one
// Docker engine are not supported: each removes the other's leftovers.
package e2e
