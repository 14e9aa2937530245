package check

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Errors of the package, checked with errors.Is.
var (
	// ErrRender: kustomize failed, or an object does not decode strictly
	// into its typed API.
	ErrRender = errors.New("check: render")
	// ErrPod: the rendered pod uses something Describe cannot reproduce
	// outside a cluster, or refers to an object the render lacks.
	ErrPod = errors.New("check: pod")
)

// Tree is where LoadTree puts deploy/kubernetes in its in-memory file
// system: overlays added by tests or the e2e suite sit next to the shipped
// ones (Tree + "/overlays/<name>").
const Tree = "/k"

// typed maps apiVersion/kind to a new object of its typed API. A kind the
// manifests use must be listed here, or the render fails.
var typed = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Namespace":                            func() any { return &corev1.Namespace{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// LoadTree copies the directory dir (deploy/kubernetes) into a new
// in-memory file system under Tree, so that a render can add overlays and
// token files without touching the working tree.
func LoadTree(dir string) (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		to := filepath.Join(Tree, rel)
		if d.IsDir() {
			return mem.MkdirAll(to)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(to, b)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %w", ErrRender, dir, err)
	}
	return mem, nil
}

// Render runs kustomize on one directory of fsys and decodes every object
// strictly (an unknown, misspelt or duplicate field is an error).
func Render(fsys filesys.FileSystem, dir string) ([]any, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: kustomize %s: %w", ErrRender, dir, err)
	}
	var objs []any
	var errs []error
	for _, r := range m.Resources() {
		key := r.GetApiVersion() + "/" + r.GetKind()
		mk, ok := typed[key]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s: %s %s: no typed API known to the check", ErrRender, dir, key, r.GetName()))
			continue
		}
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s %s: %w", ErrRender, dir, key, r.GetName(), err)
		}
		obj := mk()
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %s %s: %w", ErrRender, dir, key, r.GetName(), err))
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}

// find returns the objects of one type.
func find[T any](objs []any) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
