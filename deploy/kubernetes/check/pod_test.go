package check

import (
	"errors"
	"path"
	"slices"
	"testing"
)

// TestDescribe: the base's pod as the kubelet would run it, with the
// token Secret an overlay supplies: files owned by root with the fsGroup's
// group and mode 0440, the replica's user and groups, /tmp a tmpfs, the
// node id from the pod's name. Without the Secret, Describe says to
// supply it.
func TestDescribe(t *testing.T) {
	fsys := tree(t)
	if _, err := Describe(render(t, fsys, "base"), "p-0"); !errors.Is(err, ErrPod) {
		t.Errorf("Describe without the token Secret: %v, want ErrPod", err)
	}
	k := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base]
secretGenerator:
  - name: shardcron-http-tokens
    literals: [read=r-token-0123456789abcdef, operate=o-token-0123456789abcdef]
`
	if err := fsys.WriteFile(path.Join(Tree, "overlays/describe/kustomization.yaml"), []byte(k)); err != nil {
		t.Fatal(err)
	}
	run, err := Describe(render(t, fsys, "overlays/describe"), "p-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.InitContainers) != 1 || len(run.Containers) != 1 {
		t.Fatalf("%d init containers, %d containers", len(run.InitContainers), len(run.Containers))
	}
	c := run.Containers[0]
	if c.User != 65532 || c.Group != 65532 || !slices.Equal(c.Groups, []int64{65532}) || !c.ReadOnlyRoot || !c.NoNewPrivileges || !slices.Equal(c.CapDrop, []string{"ALL"}) {
		t.Errorf("identity and lock-down: %+v", c)
	}
	if len(c.Tmpfs) != 1 || c.Tmpfs[0].Path != "/tmp" || c.Tmpfs[0].Mode != 0o777 {
		t.Errorf("tmpfs %+v, want /tmp 0777", c.Tmpfs)
	}
	i := slices.IndexFunc(c.Files, func(m FileMount) bool { return m.Volume == "http-tokens" })
	if i < 0 || !c.Files[i].ReadOnly || len(c.Files[i].Files) != 2 {
		t.Fatalf("token mount: %+v", c.Files)
	}
	for _, f := range c.Files[i].Files {
		if f.Mode != 0o440 || f.UID != 0 || f.GID != 65532 {
			t.Errorf("token file %s: mode %04o %d:%d, want 0440 0:65532", f.Name, f.Mode, f.UID, f.GID)
		}
	}
	if !slices.Contains(c.Env, EnvVar{"SHARDCRON_NODE_ID", "p-0"}) {
		t.Errorf("env %v: no SHARDCRON_NODE_ID=p-0", c.Env)
	}
	if c.Readiness == nil || c.Readiness.Path != "/readyz" || c.Readiness.Port != 8080 {
		t.Errorf("readiness %+v", c.Readiness)
	}
}
