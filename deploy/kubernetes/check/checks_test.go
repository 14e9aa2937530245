package check

import (
	"path"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestHTTPTLSComponent: the example overlay with components/http-tls
// serves HTTPS from the mounted certificate, probes and scrapes included,
// and passes every check.
func TestHTTPTLSComponent(t *testing.T) {
	fsys := withTokens(t, tree(t))
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../example]\ncomponents: [../../components/http-tls]\n"
	if err := fsys.WriteFile(path.Join(Tree, "overlays/tls/kustomization.yaml"), []byte(k)); err != nil {
		t.Fatal(err)
	}
	objs := render(t, fsys, "overlays/tls")
	checkWorkload(t, objs)
	security(t, "overlays/tls", objs)
	c := find[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["SHARDCRON_HTTP_TLS_CERT"] == "" || env["SHARDCRON_HTTP_TLS_KEY"] == "" {
		t.Error("no SHARDCRON_HTTP_TLS_CERT/KEY on the server")
	}
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("probe %+v does not use HTTPS", p)
		}
	}
	sm := find[*monitoringv1.ServiceMonitor](objs)
	if len(sm) != 1 || sm[0].Spec.Endpoints[0].Scheme == nil || *sm[0].Spec.Endpoints[0].Scheme != "https" {
		t.Error("the ServiceMonitor does not scrape HTTPS")
	}
}

// TestChecksFailBadManifests feeds each check an overlay of the base that
// breaks what it guards and sees it fail.
func TestChecksFailBadManifests(t *testing.T) {
	cases := []struct {
		name, kustomization string
		check               func([]any) []string
		want                string
	}{
		{
			name: "secret-unreadable",
			kustomization: `
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: shardcron}
      spec:
        template:
          spec:
            securityContext: {fsGroup: null}
            volumes:
              - name: http-tokens
                secret: {defaultMode: 0400}
`,
			check: ReadableFiles,
			want:  "/etc/shardcron/tokens/* (volume http-tokens, Secret shardcron-http-tokens) is mode 0400, owner root, group 0: user 65532 (groups []) cannot read it",
		},
		{
			// 0440 without an fsGroup: the files' group is root's.
			name: "no-fsgroup",
			kustomization: `
patches:
  - target: {kind: Deployment}
    patch: |-
      - op: remove
        path: /spec/template/spec/securityContext/fsGroup
`,
			check: ReadableFiles,
			want:  "is mode 0440, owner root, group 0: user 65532 (groups []) cannot read it",
		},
		{
			name: "example-tokens",
			kustomization: `
secretGenerator:
  - name: shardcron-http-tokens
    literals:
      - read=example-read-token-replace-me
      - operate=a-real-looking-token-VnQ2xk9
`,
			check: func(objs []any) []string { return ExampleTokens(objs, knownTokens(t)) },
			want:  "key read holds the published example token example-read-token-replace-me",
		},
		{
			name: "no-networkpolicy",
			kustomization: `
patches:
  - patch: |-
      $patch: delete
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      metadata: {name: shardcron}
`,
			check: NetworkPolicies,
			want:  "no NetworkPolicy restricts both ingress and egress",
		},
		{
			name: "egress-to-metadata",
			kustomization: `
patches:
  - target: {kind: NetworkPolicy}
    patch: |-
      - op: remove
        path: /spec/egress/2/to/0/ipBlock/except
`,
			check: NetworkPolicies,
			want:  "reaches the cloud metadata address 169.254.169.254",
		},
		{
			name: "ingress-from-everywhere",
			kustomization: `
patches:
  - target: {kind: NetworkPolicy}
    patch: |-
      - op: remove
        path: /spec/ingress/0/from
`,
			check: NetworkPolicies,
			want:  "ingress rule 0 admits every source",
		},
		{
			name: "setting-not-mounted",
			kustomization: `
configMapGenerator:
  - name: shardcron-etcd
    behavior: merge
    literals: [SHARDCRON_ETCD_CACERT=/etc/ssl/etcd-ca.crt]
`,
			check: MountedSettings,
			want:  "container apply-jobs: SHARDCRON_ETCD_CACERT=/etc/ssl/etcd-ca.crt is in no Secret or ConfigMap volume",
		},
	}
	fsys := tree(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := "overlays/bad-" + c.name
			k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../base]\n" + c.kustomization
			if err := fsys.WriteFile(path.Join(Tree, dir, "kustomization.yaml"), []byte(k)); err != nil {
				t.Fatal(err)
			}
			probs := c.check(render(t, fsys, dir))
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q, want one saying %q", probs, c.want)
			}
		})
	}
}
