// Package check is the static check of deploy/kubernetes, run by
// `make test`: it renders the base and the example overlay with kustomize's
// krusty, decodes every object strictly into its typed API (k8s.io/api, and
// the prometheus-operator monitoring types), so a misspelt field fails, and
// checks what the issue asks of the manifests (probes, grace period,
// security context, the alert rules matching deploy/prometheus/alerts.yaml).
// It is its own Go module so that kustomize and k8s.io never join
// shardcron's go.mod. Nothing here talks to a Kubernetes cluster.
package check
