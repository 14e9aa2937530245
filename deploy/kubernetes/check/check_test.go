package check

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "regenerate components/monitoring/prometheusrule.yaml from deploy/prometheus/alerts.yaml")

const (
	root       = ".."
	alertsFile = "../../prometheus/alerts.yaml"
	rulesFile  = "../components/monitoring/prometheusrule.yaml"
	// exampleTokensFile lists the published example tokens (httpauth).
	exampleTokensFile = "../../../httpauth/example-tokens.txt"
	// drainTimeout is what the base sets (SHARDCRON_DRAIN_TIMEOUT).
	drainTimeout = 10 * time.Second
)

// render renders one directory of the in-memory tree (LoadTree).
func render(t *testing.T, fsys filesys.FileSystem, dir string) []any {
	t.Helper()
	objs, err := Render(fsys, path.Join(Tree, dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// tree loads deploy/kubernetes into memory.
func tree(t *testing.T) filesys.FileSystem {
	t.Helper()
	fsys, err := LoadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// knownTokens reads httpauth's list of published example tokens, the
// one the server's loader refuses.
func knownTokens(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(exampleTokensFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if tok := strings.TrimSpace(line); tok != "" && !strings.HasPrefix(tok, "#") {
			out = append(out, tok)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no token", exampleTokensFile)
	}
	return out
}

// security runs the checks every render must pass.
func security(t *testing.T, dir string, objs []any) {
	t.Helper()
	for _, probs := range [][]string{ReadableFiles(objs), NetworkPolicies(objs), MountedSettings(objs), ExampleTokens(objs, knownTokens(t))} {
		for _, p := range probs {
			t.Errorf("%s: %s", dir, p)
		}
	}
}

func TestBase(t *testing.T) {
	objs := render(t, tree(t), "base")
	if n := len(find[*monitoringv1.ServiceMonitor](objs)) + len(find[*monitoringv1.PrometheusRule](objs)); n > 0 {
		t.Error("the base must install without the Prometheus operator: monitoring objects belong in the component")
	}
	checkWorkload(t, objs)
	security(t, "base", objs)
}

// withTokens writes random API tokens where the example overlay's
// operator writes theirs (they are never shipped).
func withTokens(t *testing.T, fsys filesys.FileSystem) filesys.FileSystem {
	t.Helper()
	for _, f := range []string{"read", "operate"} {
		if err := fsys.WriteFile(path.Join(Tree, "overlays/example/tokens", f), []byte(rand.Text()+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

// TestExampleOverlayNeedsTokens: the example overlay does not build until
// the operator writes tokens/read and tokens/operate, and the error names
// the missing file.
func TestExampleOverlayNeedsTokens(t *testing.T) {
	fsys := tree(t)
	if err := fsys.RemoveAll(path.Join(Tree, "overlays/example/tokens")); err != nil {
		t.Fatal(err)
	}
	_, err := Render(fsys, path.Join(Tree, "overlays/example"))
	if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "tokens/read") {
		t.Errorf("example overlay without tokens: %v, want a render error naming tokens/read", err)
	}
}

func TestExampleOverlay(t *testing.T) {
	objs := render(t, withTokens(t, tree(t)), "overlays/example")
	checkWorkload(t, objs)
	security(t, "overlays/example", objs)
	if len(find[*monitoringv1.ServiceMonitor](objs)) != 1 {
		t.Error("the example overlay should carry one ServiceMonitor")
	}
	rules := find[*monitoringv1.PrometheusRule](objs)
	if len(rules) != 1 {
		t.Fatalf("the example overlay should carry one PrometheusRule, has %d", len(rules))
	}
	if !reflect.DeepEqual(rules[0].Spec, alerts(t)) {
		t.Errorf("%s differs from %s: run `make k8s-rules`", rulesFile, alertsFile)
	}
	// The production shape: etcd over TLS, with a client certificate and a
	// password (components/etcd-tls; MountedSettings checks the files are
	// mounted, ReadableFiles that the replica can read them).
	etcd := 0
	for _, cm := range find[*corev1.ConfigMap](objs) {
		if !strings.HasPrefix(cm.Name, "shardcron-etcd") {
			continue
		}
		etcd++
		for ep := range strings.SplitSeq(cm.Data["SHARDCRON_ETCD_ENDPOINTS"], ",") {
			if !strings.HasPrefix(ep, "https://") {
				t.Errorf("etcd endpoint %q: the example overlay talks TLS to etcd", ep)
			}
		}
		for _, k := range []string{"SHARDCRON_ETCD_CACERT", "SHARDCRON_ETCD_CERT", "SHARDCRON_ETCD_KEY", "SHARDCRON_ETCD_USERNAME", "SHARDCRON_ETCD_PASSWORD_FILE"} {
			if cm.Data[k] == "" {
				t.Errorf("the example overlay sets no %s", k)
			}
		}
	}
	if etcd != 1 {
		t.Errorf("want one shardcron-etcd ConfigMap, have %d", etcd)
	}
	for _, d := range find[*appsv1.Deployment](objs) {
		if d.Namespace != "shardcron" {
			t.Errorf("deployment in namespace %q", d.Namespace)
		}
	}
}

// TestMain regenerates the component's PrometheusRule first when asked to
// (-update, `make k8s-rules`).
func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		if err := writeRules(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// readAlerts reads deploy/prometheus/alerts.yaml strictly as a rule spec.
func readAlerts() (monitoringv1.PrometheusRuleSpec, error) {
	var spec monitoringv1.PrometheusRuleSpec
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		return spec, err
	}
	if err := yaml.UnmarshalStrict(b, &spec); err != nil {
		return spec, fmt.Errorf("%s: %w", alertsFile, err)
	}
	if len(spec.Groups) == 0 {
		return spec, fmt.Errorf("%s: no rule groups", alertsFile)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Expr.String() == "" || (r.Alert == "") == (r.Record == "") {
				return spec, fmt.Errorf("%s: group %s: a rule needs an expr and exactly one of alert, record", alertsFile, g.Name)
			}
		}
	}
	return spec, nil
}

func alerts(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	spec, err := readAlerts()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func writeRules() error {
	spec, err := readAlerts()
	if err != nil {
		return err
	}
	pr := monitoringv1.PrometheusRule{Spec: spec}
	pr.APIVersion, pr.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
	pr.Name, pr.Labels = "shardcron", map[string]string{"app.kubernetes.io/name": "shardcron"}
	b, err := yaml.Marshal(pr)
	if err != nil {
		return err
	}
	header := "# GENERATED from deploy/prometheus/alerts.yaml by `make k8s-rules`; do not edit.\n"
	return os.WriteFile(rulesFile, append([]byte(header), b...), 0o644)
}

// checkWorkload checks what the issue asks of the replicas' pods.
func checkWorkload(t *testing.T, objs []any) {
	t.Helper()
	deps := find[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		t.Fatalf("want one Deployment, have %d", len(deps))
	}
	pod := deps[0].Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drainTimeout+time.Second {
		t.Errorf("terminationGracePeriodSeconds must exceed the drain timeout (%v) plus a second", drainTimeout)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod must run as non-root")
	}
	tmp := ""
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			tmp = v.Name
		}
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: needs a read-only root filesystem and no privilege escalation", c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s: needs cpu and memory requests", c.Name)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tmp && m.MountPath == "/tmp" }) {
			t.Errorf("container %s: needs an emptyDir on /tmp", c.Name)
		}
	}
	c := pod.Containers[0]
	probe := func(p *corev1.Probe, path, what string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("container %s: %s probe must GET %s", c.Name, what, path)
		}
	}
	probe(c.LivenessProbe, "/healthz", "liveness")
	probe(c.ReadinessProbe, "/readyz", "readiness")
	nodeID := false
	for _, e := range c.Env {
		if e.Name == "SHARDCRON_NODE_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			nodeID = true
		}
		if e.Name == "SHARDCRON_DRAIN_TIMEOUT" && e.Value != drainTimeout.String() && e.Value != fmt.Sprintf("%ds", int(drainTimeout.Seconds())) {
			t.Errorf("SHARDCRON_DRAIN_TIMEOUT is %s; the check assumes %v", e.Value, drainTimeout)
		}
	}
	if !nodeID {
		t.Error("SHARDCRON_NODE_ID must come from the pod's name (downward API)")
	}
	// The Deployment, the PodDisruptionBudget and the Service all select
	// the replicas' pods.
	podLabels := deps[0].Spec.Template.Labels
	selects := func(what string, sel map[string]string) {
		if len(sel) == 0 {
			t.Errorf("%s has no selector", what)
		}
		for k, v := range sel {
			if podLabels[k] != v {
				t.Errorf("%s selects %s=%s, which the pods do not carry", what, k, v)
			}
		}
	}
	if deps[0].Spec.Selector == nil {
		t.Fatal("deployment has no selector")
	}
	selects("deployment", deps[0].Spec.Selector.MatchLabels)
	pdbs := find[*policyv1.PodDisruptionBudget](objs)
	if len(pdbs) != 1 || pdbs[0].Spec.Selector == nil {
		t.Fatal("want one PodDisruptionBudget with a selector")
	}
	selects("pdb", pdbs[0].Spec.Selector.MatchLabels)
	// Every ConfigMap the pod refers to exists under its generated name.
	cms := map[string]bool{}
	for _, cm := range find[*corev1.ConfigMap](objs) {
		cms[cm.Name] = true
	}
	for _, ref := range configMapRefs(pod) {
		if !cms[ref] {
			t.Errorf("pod refers to ConfigMap %s, which the kustomization does not create", ref)
		}
	}
	for _, s := range find[*corev1.Service](objs) {
		selects("service "+s.Name, s.Spec.Selector)
	}
}

func configMapRefs(pod corev1.PodSpec) []string {
	var refs []string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil {
			refs = append(refs, v.ConfigMap.Name)
		}
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				refs = append(refs, e.ConfigMapRef.Name)
			}
		}
	}
	return refs
}
