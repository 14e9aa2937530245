// Package check is the static check of deploy/kubernetes, run by
// `make test` (`make k8s-check`): it renders the base and the example
// overlay with kustomize's krusty, in memory (LoadTree, Render), decodes
// every object strictly into its typed API (k8s.io/api, and the
// prometheus-operator monitoring types), so a misspelt field fails, and
// checks what the issues ask of the manifests: probes, grace period,
// security context, the alert rules matching deploy/prometheus/alerts.yaml,
// Secret files the non-root replica can read (ReadableFiles), file settings
// that name mounted files (MountedSettings), no published example token
// (ExampleTokens, from httpauth/example-tokens.txt) and a NetworkPolicy that
// names its ingress namespaces and keeps egress off cloud metadata
// (NetworkPolicies). Each check has a test that feeds it a bad overlay.
//
// Describe turns the rendered pod into a PodRun: how the kubelet would run
// it (user and groups, read-only root, capabilities, tmpfs for emptyDir,
// Secret files owned by root with the manifest's mode and fsGroup, the
// environment and args). cmd/podrun prints it as JSON for the e2e suite,
// which runs the image on Docker exactly so; the settings live only in the
// manifests.
//
// It is its own Go module so that kustomize and k8s.io never join
// shardcron's go.mod. Nothing here talks to a Kubernetes cluster.
package check
