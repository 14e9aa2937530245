package check

import (
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// defaultFileMode is the kubelet's mode for secret and configMap files
// when the volume sets none.
const defaultFileMode = 0o644

// perm is how the kubelet writes one file of a volume: owned by root, the
// group the pod's fsGroup when set (root otherwise), the item's mode, else
// the volume's defaultMode, else 0644. (With an fsGroup the kubelet also
// adds group read; the check does not count on that, so the manifest must
// say the mode it needs.)
type perm struct {
	key  string // the Secret or ConfigMap key; "" for all keys
	path string // the file's name in the volume
	mode uint32
	gid  int64
}

func filePerm(pod corev1.PodSpec, key, path string, item, volume *int32) perm {
	mode := uint32(defaultFileMode)
	if volume != nil {
		mode = uint32(*volume)
	}
	if item != nil {
		mode = uint32(*item)
	}
	gid := int64(0)
	if sc := pod.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = *sc.FSGroup
	}
	return perm{key: key, path: path, mode: mode, gid: gid}
}

// source is one Secret or ConfigMap feeding a volume.
type source struct {
	kind, name string
	items      []corev1.KeyToPath
	optional   bool
	mode       *int32 // the volume's defaultMode
}

// volumeSources returns the Secrets and ConfigMaps behind a volume; ok is
// false for a volume of another kind.
func volumeSources(v corev1.Volume) (srcs []source, ok bool) {
	opt := func(b *bool) bool { return b != nil && *b }
	switch {
	case v.Secret != nil:
		return []source{{"Secret", v.Secret.SecretName, v.Secret.Items, opt(v.Secret.Optional), v.Secret.DefaultMode}}, true
	case v.ConfigMap != nil:
		return []source{{"ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items, opt(v.ConfigMap.Optional), v.ConfigMap.DefaultMode}}, true
	case v.Projected != nil:
		for _, p := range v.Projected.Sources {
			switch {
			case p.Secret != nil:
				srcs = append(srcs, source{"Secret", p.Secret.Name, p.Secret.Items, opt(p.Secret.Optional), v.Projected.DefaultMode})
			case p.ConfigMap != nil:
				srcs = append(srcs, source{"ConfigMap", p.ConfigMap.Name, p.ConfigMap.Items, opt(p.ConfigMap.Optional), v.Projected.DefaultMode})
			}
		}
		return srcs, true
	}
	return nil, false
}

// perms lists the files of one source: one per item, or one for every key
// ("") when the volume names no items.
func (s source) perms(pod corev1.PodSpec) []perm {
	if len(s.items) == 0 {
		return []perm{filePerm(pod, "", "", nil, s.mode)}
	}
	var out []perm
	for _, it := range s.items {
		out = append(out, filePerm(pod, it.Key, it.Path, it.Mode, s.mode))
	}
	return out
}

// identity is who a container's process runs as: -1 for what the manifest
// leaves to the image.
type identity struct {
	uid, gid int64
	groups   []int64
}

func containerIdentity(pod corev1.PodSpec, c corev1.Container) identity {
	id := identity{uid: -1, gid: -1}
	if sc := pod.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			id.uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			id.gid = *sc.RunAsGroup
		}
		if sc.FSGroup != nil {
			id.groups = append(id.groups, *sc.FSGroup)
		}
		id.groups = append(id.groups, sc.SupplementalGroups...)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			id.uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			id.gid = *sc.RunAsGroup
		}
	}
	return id
}

// canRead says whether id may read a file of perm p (owned by root).
func (id identity) canRead(p perm) bool {
	switch {
	case id.uid == 0, p.mode&0o004 != 0:
		return true
	case p.mode&0o040 != 0:
		return id.gid == p.gid || slices.Contains(id.groups, p.gid)
	}
	return false
}

// Describe returns how to run the pod of the one Deployment in objs, named
// podName (its downward-API metadata.name). Every Secret and ConfigMap the
// pod reads must be in objs.
func Describe(objs []any, podName string) (PodRun, error) {
	deps := find[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		return PodRun{}, fmt.Errorf("%w: want one Deployment, have %d", ErrPod, len(deps))
	}
	d := deps[0]
	pod := d.Spec.Template.Spec
	data := map[string]map[string][]byte{} // kind/name → key → bytes
	for _, s := range find[*corev1.Secret](objs) {
		m := maps.Clone(s.Data)
		if m == nil {
			m = map[string][]byte{}
		}
		for k, v := range s.StringData {
			m[k] = []byte(v)
		}
		data["Secret/"+s.Name] = m
	}
	for _, cm := range find[*corev1.ConfigMap](objs) {
		m := map[string][]byte{}
		for k, v := range cm.Data {
			m[k] = []byte(v)
		}
		maps.Copy(m, cm.BinaryData)
		data["ConfigMap/"+cm.Name] = m
	}
	run := PodRun{Name: podName}
	for i, list := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for _, c := range list {
			cr, err := describeContainer(pod, c, d.Namespace, podName, data)
			if err != nil {
				return PodRun{}, fmt.Errorf("%w: container %s: %w", ErrPod, c.Name, err)
			}
			if i == 0 {
				run.InitContainers = append(run.InitContainers, cr)
			} else {
				run.Containers = append(run.Containers, cr)
			}
		}
	}
	return run, nil
}

func describeContainer(pod corev1.PodSpec, c corev1.Container, namespace, podName string, data map[string]map[string][]byte) (ContainerRun, error) {
	id := containerIdentity(pod, c)
	cr := ContainerRun{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, User: id.uid, Group: id.gid, Groups: id.groups}
	if sc := c.SecurityContext; sc != nil {
		cr.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		cr.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		if sc.Privileged != nil && *sc.Privileged {
			return cr, fmt.Errorf("privileged containers are not reproduced")
		}
		if caps := sc.Capabilities; caps != nil {
			for _, cp := range caps.Drop {
				cr.CapDrop = append(cr.CapDrop, string(cp))
			}
			for _, cp := range caps.Add {
				cr.CapAdd = append(cr.CapAdd, string(cp))
			}
		}
	}
	if m := c.Resources.Limits.Memory(); m != nil && !m.IsZero() {
		cr.MemoryLimit = m.Value()
	}
	env, err := containerEnv(c, namespace, podName, data)
	if err != nil {
		return cr, err
	}
	cr.Env = env
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return cr, fmt.Errorf("mount %s: no such volume", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return cr, fmt.Errorf("mount %s: subPath is not reproduced", m.Name)
		}
		if v.EmptyDir != nil {
			t := Tmpfs{Path: m.MountPath, Mode: 0o777}
			if v.EmptyDir.SizeLimit != nil {
				t.Size = v.EmptyDir.SizeLimit.Value()
			}
			cr.Tmpfs = append(cr.Tmpfs, t)
			continue
		}
		srcs, ok := volumeSources(v)
		if !ok {
			return cr, fmt.Errorf("volume %s: only emptyDir, secret, configMap and projected volumes are reproduced", v.Name)
		}
		fm := FileMount{Volume: v.Name, Path: m.MountPath, ReadOnly: m.ReadOnly}
		for _, s := range srcs {
			files, err := s.files(pod, data)
			if err != nil {
				return cr, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			fm.Files = append(fm.Files, files...)
		}
		cr.Files = append(cr.Files, fm)
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
		port := p.HTTPGet.Port.IntVal
		if name := p.HTTPGet.Port.StrVal; name != "" {
			i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == name })
			if i < 0 {
				return cr, fmt.Errorf("readiness probe: no port named %s", name)
			}
			port = c.Ports[i].ContainerPort
		}
		cr.Readiness = &HTTPProbe{Path: p.HTTPGet.Path, Port: port}
	}
	return cr, nil
}

// files returns the files a source writes, with their content.
func (s source) files(pod corev1.PodSpec, data map[string]map[string][]byte) ([]File, error) {
	m, ok := data[s.kind+"/"+s.name]
	if !ok {
		if s.optional {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %s is not in the rendered manifests: supply it", s.kind, s.name)
	}
	var out []File
	for _, p := range s.perms(pod) {
		if p.key != "" {
			b, ok := m[p.key]
			if !ok {
				return nil, fmt.Errorf("%s %s has no key %s", s.kind, s.name, p.key)
			}
			out = append(out, File{Name: p.path, Data: b, Mode: p.mode, UID: 0, GID: p.gid})
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, File{Name: k, Data: m[k], Mode: p.mode, UID: 0, GID: p.gid})
		}
	}
	return out, nil
}

// containerEnv resolves envFrom, then env (which wins on a repeated name),
// as the kubelet does.
func containerEnv(c corev1.Container, namespace, podName string, data map[string]map[string][]byte) ([]EnvVar, error) {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, ef := range c.EnvFrom {
		key := ""
		switch {
		case ef.ConfigMapRef != nil:
			key = "ConfigMap/" + ef.ConfigMapRef.Name
		case ef.SecretRef != nil:
			key = "Secret/" + ef.SecretRef.Name
		}
		m, ok := data[key]
		if !ok {
			return nil, fmt.Errorf("envFrom %s: not in the rendered manifests", key)
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			set(ef.Prefix+k, string(m[k]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, e.Value)
			continue
		}
		switch vf := e.ValueFrom; {
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.name":
			set(e.Name, podName)
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.namespace":
			set(e.Name, namespace)
		case vf.ConfigMapKeyRef != nil || vf.SecretKeyRef != nil:
			key, sel := "", ""
			if r := vf.ConfigMapKeyRef; r != nil {
				key, sel = "ConfigMap/"+r.Name, r.Key
			} else {
				key, sel = "Secret/"+vf.SecretKeyRef.Name, vf.SecretKeyRef.Key
			}
			b, ok := data[key][sel]
			if !ok {
				return nil, fmt.Errorf("env %s: %s has no key %s in the rendered manifests", e.Name, key, sel)
			}
			set(e.Name, string(b))
		default:
			return nil, fmt.Errorf("env %s: this valueFrom is not reproduced", e.Name)
		}
	}
	out := make([]EnvVar, 0, len(order))
	for _, k := range order {
		out = append(out, EnvVar{Name: k, Value: vals[k]})
	}
	return out, nil
}
