package check

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The checks below return what is wrong, one sentence a problem; nil when
// all is well.

// pod returns the one Deployment's pod template, or a problem.
func pod(objs []any) (*appsv1.Deployment, []string) {
	deps := find[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		return nil, []string{fmt.Sprintf("want one Deployment, have %d", len(deps))}
	}
	return deps[0], nil
}

// ReadableFiles: every file a container mounts from a Secret, ConfigMap or
// projected volume is readable by the container's user, as the kubelet
// writes it (root-owned, the fsGroup's group, the manifest's mode). A
// non-root pod with a 0400 Secret and no fsGroup cannot read its tokens.
func ReadableFiles(objs []any) []string {
	d, probs := pod(objs)
	if d == nil {
		return probs
	}
	spec := d.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		id := containerIdentity(spec, c)
		for _, m := range c.VolumeMounts {
			srcs, _ := volumeSources(vols[m.Name])
			for _, s := range srcs {
				for _, p := range s.perms(spec) {
					if !id.canRead(p) {
						probs = append(probs, fmt.Sprintf("container %s: %s (volume %s, %s %s) is mode %04o, owner root, group %d: user %d (groups %v) cannot read it; set fsGroup and a mode of at least 0440",
							c.Name, inVolume(m.MountPath, p.path), m.Name, s.kind, s.name, p.mode, p.gid, id.uid, id.groups))
					}
				}
			}
		}
	}
	return probs
}

func inVolume(dir, name string) string {
	if name == "" {
		return dir + "/*"
	}
	return dir + "/" + name
}

// ExampleTokens: no Secret holds a published example token (known, as
// httpauth/example-tokens.txt lists them).
func ExampleTokens(objs []any, known []string) []string {
	var probs []string
	for _, s := range find[*corev1.Secret](objs) {
		vals := map[string][]byte{}
		for k, v := range s.Data {
			vals[k] = v
		}
		for k, v := range s.StringData {
			vals[k] = []byte(v)
		}
		for k, v := range vals {
			for _, tok := range known {
				if bytes.Contains(v, []byte(tok)) {
					probs = append(probs, fmt.Sprintf("Secret %s key %s holds the published example token %s: generate your own", s.Name, k, tok))
				}
			}
		}
	}
	slices.Sort(probs)
	return probs
}

// metadata are the cloud instance metadata addresses (AWS, GCP, Azure,
// OpenStack, DigitalOcean: 169.254.169.254; AWS over IPv6; Alibaba) that no
// egress rule may reach: they hand out the node's cloud credentials.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// NetworkPolicies: a NetworkPolicy selects the replicas' pods for ingress
// and egress; ingress comes only from chosen namespaces or pods (no ipBlock,
// no empty rule, no selector of every namespace); no egress rule reaches a
// cloud metadata address.
func NetworkPolicies(objs []any) []string {
	d, probs := pod(objs)
	if d == nil {
		return probs
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	ingress, egress := false, false
	for _, np := range find[*networkingv1.NetworkPolicy](objs) {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			probs = append(probs, fmt.Sprintf("NetworkPolicy %s: %v", np.Name, err))
			continue
		}
		if !sel.Matches(podLabels) {
			continue
		}
		for _, pt := range np.Spec.PolicyTypes {
			ingress = ingress || pt == networkingv1.PolicyTypeIngress
			egress = egress || pt == networkingv1.PolicyTypeEgress
		}
		for i, r := range np.Spec.Ingress {
			if len(r.From) == 0 {
				probs = append(probs, fmt.Sprintf("NetworkPolicy %s: ingress rule %d admits every source: name the namespaces", np.Name, i))
			}
			for _, p := range r.From {
				if p.IPBlock != nil {
					probs = append(probs, fmt.Sprintf("NetworkPolicy %s: ingress rule %d admits ipBlock %s: name the namespaces", np.Name, i, p.IPBlock.CIDR))
				}
				if ns := p.NamespaceSelector; ns != nil && len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 0 {
					probs = append(probs, fmt.Sprintf("NetworkPolicy %s: ingress rule %d admits every namespace: name them", np.Name, i))
				}
			}
		}
		for i, r := range np.Spec.Egress {
			if len(r.To) == 0 {
				probs = append(probs, fmt.Sprintf("NetworkPolicy %s: egress rule %d reaches every address, cloud metadata included", np.Name, i))
			}
			for _, p := range r.To {
				if p.IPBlock == nil {
					continue
				}
				if a, ok := reaches(*p.IPBlock); ok {
					probs = append(probs, fmt.Sprintf("NetworkPolicy %s: egress rule %d (ipBlock %s) reaches the cloud metadata address %s: add it to except", np.Name, i, p.IPBlock.CIDR, a))
				}
			}
		}
	}
	if !ingress || !egress {
		probs = append(probs, "no NetworkPolicy restricts both ingress and egress of the replicas' pods")
	}
	return probs
}

// reaches returns a metadata address that the block admits.
func reaches(b networkingv1.IPBlock) (netip.Addr, bool) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range metadata {
		if !cidr.Contains(a) {
			continue
		}
		if !slices.ContainsFunc(b.Except, func(e string) bool {
			p, err := netip.ParsePrefix(e)
			return err == nil && p.Contains(a)
		}) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// fileSettings are the settings that name a file the replica reads.
var fileSettings = []string{
	"SHARDCRON_HTTP_READ_TOKENS_FILE", "SHARDCRON_HTTP_OPERATE_TOKENS_FILE",
	"SHARDCRON_HTTP_TLS_CERT", "SHARDCRON_HTTP_TLS_KEY",
	"SHARDCRON_ETCD_CACERT", "SHARDCRON_ETCD_CERT", "SHARDCRON_ETCD_KEY", "SHARDCRON_ETCD_PASSWORD_FILE",
}

// MountedSettings: every file setting in a container's environment (env or
// a rendered ConfigMap) names a path inside one of its file volumes.
func MountedSettings(objs []any) []string {
	d, probs := pod(objs)
	if d == nil {
		return probs
	}
	spec := d.Spec.Template.Spec
	cms := map[string]map[string]string{}
	for _, cm := range find[*corev1.ConfigMap](objs) {
		cms[cm.Name] = cm.Data
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		env := map[string]string{}
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				for k, v := range cms[ef.ConfigMapRef.Name] {
					env[ef.Prefix+k] = v
				}
			}
		}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		for _, k := range fileSettings {
			path, ok := env[k]
			if !ok || path == "" {
				continue
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				_, files := volumeSources(vols[m.Name])
				return files && strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
			}) {
				probs = append(probs, fmt.Sprintf("container %s: %s=%s is in no Secret or ConfigMap volume it mounts", c.Name, k, path))
			}
		}
	}
	return probs
}
