package check

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "regenerate components/monitoring/prometheusrule.yaml from deploy/prometheus/alerts.yaml")

const (
	root       = ".."
	alertsFile = "../../prometheus/alerts.yaml"
	rulesFile  = "../components/monitoring/prometheusrule.yaml"
	// drainTimeout is what the base sets (SHARDCRON_DRAIN_TIMEOUT).
	drainTimeout = 10 * time.Second
)

// typed maps apiVersion/kind to a new object of its typed API. A kind the
// manifests use must be listed here, or the check fails.
var typed = map[string]func() any{
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"v1/Namespace":                  func() any { return &corev1.Namespace{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"v1/ServiceAccount":             func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// render runs kustomize on one directory and decodes every object strictly.
func render(t *testing.T, dir string) []any {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var objs []any
	for _, r := range m.Resources() {
		key := r.GetApiVersion() + "/" + r.GetKind()
		mk, ok := typed[key]
		if !ok {
			t.Errorf("%s: %s %s: no typed API known to the check", dir, key, r.GetName())
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj := mk()
		// Strict: an unknown (misspelt) or duplicate field is an error.
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			t.Errorf("%s: %s %s: %v", dir, key, r.GetName(), err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

func find[T any](objs []any) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestBase(t *testing.T) {
	objs := render(t, "base")
	if n := len(find[*monitoringv1.ServiceMonitor](objs)) + len(find[*monitoringv1.PrometheusRule](objs)); n > 0 {
		t.Error("the base must install without the Prometheus operator: monitoring objects belong in the component")
	}
	checkWorkload(t, objs)
}

func TestExampleOverlay(t *testing.T) {
	objs := render(t, "overlays/example")
	checkWorkload(t, objs)
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
