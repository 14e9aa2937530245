//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// podRun mirrors the JSON of deploy/kubernetes/check's PodRun (printed by
// its cmd/podrun): how the kubelet would run the rendered Deployment's pod.
type podRun struct {
	Name           string         `json:"name"`
	InitContainers []containerRun `json:"init_containers"`
	Containers     []containerRun `json:"containers"`
}

type containerRun struct {
	Name            string   `json:"name"`
	Image           string   `json:"image"`
	Command         []string `json:"command"`
	Args            []string `json:"args"`
	User            int64    `json:"user"`
	Group           int64    `json:"group"`
	Groups          []int64  `json:"groups"`
	ReadOnlyRoot    bool     `json:"read_only_root"`
	NoNewPrivileges bool     `json:"no_new_privileges"`
	CapDrop         []string `json:"cap_drop"`
	CapAdd          []string `json:"cap_add"`
	Env             []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	MemoryLimit int64 `json:"memory_limit"`
	Tmpfs       []struct {
		Path string `json:"path"`
		Mode uint32 `json:"mode"`
		Size int64  `json:"size"`
	} `json:"tmpfs"`
	Files     []fileMount `json:"files"`
	Readiness *struct {
		Path string `json:"path"`
		Port int32  `json:"port"`
	} `json:"readiness"`
}

type fileMount struct {
	Volume   string `json:"volume"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only"`
	Files    []struct {
		Name string `json:"name"`
		Data []byte `json:"data"`
		Mode uint32 `json:"mode"`
		UID  int64  `json:"uid"`
		GID  int64  `json:"gid"`
	} `json:"files"`
}

// renderPod runs deploy/kubernetes/check's cmd/podrun on the base with
// what an operator supplies: the image, the token Secret and where etcd is.
func renderPod(t *testing.T, args ...string) podRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./cmd/podrun", "-root", "..", "-dir", "base"}, args...)...)
	cmd.Dir = filepath.Join("..", "deploy", "kubernetes", "check")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podrun: %v\n%s", err, stderr.String())
	}
	var pr podRun
	if err := json.Unmarshal(out, &pr); err != nil {
		t.Fatalf("podrun's output: %v", err)
	}
	if len(pr.Containers) != 1 {
		t.Fatalf("the rendered pod has %d containers, the test runs one", len(pr.Containers))
	}
	return pr
}

// seedVolume makes a named volume holding a FileMount's files, owned and
// moded as the kubelet writes them: a tar with those owners, copied with
// `docker cp` from standard input (which keeps the headers' owners; its
// --archive would chown to the container's user) into a container that is
// never started. checkVolume verifies the result.
func seedVolume(t *testing.T, prefix, img string, m fileMount) string {
	t.Helper()
	vol := prefix + "-" + m.Volume
	mustDocker(t, "volume", "create", "--label", label+"="+prefix, vol)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range m.Files {
		hdr := &tar.Header{Name: f.Name, Mode: int64(f.Mode), Uid: int(f.UID), Gid: int(f.GID), Size: int64(len(f.Data)), ModTime: time.Now(), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	seed := vol + "-seed"
	mustDocker(t, "create", "--name", seed, "--label", label+"="+prefix, "-v", vol+":/seed", img)
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cp := exec.CommandContext(ctx, "docker", "cp", "-", seed+":/seed")
	cp.Stdin = &buf
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("docker cp into %s: %v: %s", vol, err, out)
	}
	mustDocker(t, "rm", seed)
	return vol
}

// checkVolume reads the volume's files on the host (the engine is local)
// and compares owner, group and mode with the manifest's.
func checkVolume(t *testing.T, vol string, m fileMount) {
	t.Helper()
	dir := mustDocker(t, "volume", "inspect", "-f", "{{.Mountpoint}}", vol)
	for _, f := range m.Files {
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatalf("volume %s: %v (the test reads volumes on the engine's host)", vol, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != fs.FileMode(f.Mode) || int64(st.Uid) != f.UID || int64(st.Gid) != f.GID {
			t.Fatalf("volume %s: %s is %v %d:%d, the manifest says %v %d:%d", vol, f.Name, fi.Mode().Perm(), st.Uid, st.Gid, fs.FileMode(f.Mode), f.UID, f.GID)
		}
	}
}

// dockerArgs turns a container of the pod into `docker create` flags.
func dockerArgs(prefix, network, hostname string, c containerRun, vols map[string]string) []string {
	a := []string{"--name", prefix + "-" + c.Name, "--label", label + "=" + prefix, "--network", network, "--hostname", hostname}
	if c.User >= 0 {
		u := fmt.Sprint(c.User)
		if c.Group >= 0 {
			u += fmt.Sprintf(":%d", c.Group)
		}
		a = append(a, "--user", u)
	}
	for _, g := range c.Groups {
		a = append(a, "--group-add", fmt.Sprint(g))
	}
	if c.ReadOnlyRoot {
		a = append(a, "--read-only")
	}
	if c.NoNewPrivileges {
		a = append(a, "--security-opt", "no-new-privileges")
	}
	for _, cp := range c.CapDrop {
		a = append(a, "--cap-drop", cp)
	}
	for _, cp := range c.CapAdd {
		a = append(a, "--cap-add", cp)
	}
	if c.MemoryLimit > 0 {
		a = append(a, "--memory", fmt.Sprint(c.MemoryLimit))
	}
	for _, tm := range c.Tmpfs {
		opt := fmt.Sprintf("%s:mode=%o", tm.Path, tm.Mode)
		if tm.Size > 0 {
			opt += fmt.Sprintf(",size=%d", tm.Size)
		}
		a = append(a, "--tmpfs", opt)
	}
	for _, m := range c.Files {
		v := vols[m.Volume] + ":" + m.Path
		if m.ReadOnly {
			v += ":ro"
		}
		a = append(a, "-v", v)
	}
	for _, e := range c.Env {
		a = append(a, "-e", e.Name+"="+e.Value)
	}
	args := c.Args
	if len(c.Command) > 0 {
		a = append(a, "--entrypoint", c.Command[0])
		args = append(c.Command[1:], args...)
	}
	return append(append(a, c.Image), args...)
}

// TestKubernetesPod runs the image exactly as the rendered Deployment of
// deploy/kubernetes/base says (user and groups, read-only root, dropped
// capabilities, no privilege escalation, /tmp a tmpfs for the emptyDir, the
// token Secret's files owned by root with the manifest's mode and fsGroup,
// the env and args), init container first, against one etcd; the replica
// must become ready and serve the API with its tokens and refuse without.
func TestKubernetesPod(t *testing.T) {
	img, etcdImg := image(t, "SHARDCRON_E2E_IMAGE"), image(t, "SHARDCRON_E2E_ETCD_IMAGE")
	prefix := newPrefix()
	t.Cleanup(func() {
		if t.Failed() {
			saveLogs(t, prefix, nil)
		}
		removeLabelled(t, prefix)
		if vols, err := docker("volume", "ls", "-q", "--filter", "label="+label+"="+prefix); err != nil {
			t.Errorf("listing volumes: %v", err)
		} else if vols != "" {
			if _, err := docker(append([]string{"volume", "rm"}, strings.Fields(vols)...)...); err != nil {
				t.Errorf("removing volumes: %v", err)
			}
		}
	})
	network := prefix + "-pod"
	mustDocker(t, "network", "create", "--label", label+"="+prefix, network)
	etcd := prefix + "-etcd"
	mustDocker(t, "run", "-d", "--name", etcd, "--network", network, "--label", label+"="+prefix, etcdImg,
		"--name", "etcd", "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://"+etcd+":2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "etcd=http://127.0.0.1:2380")

	dir := t.TempDir()
	readTok, operateTok := rand.Text(), rand.Text()
	for name, tok := range map[string]string{"read": readTok, "operate": operateTok} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pod := prefix + "-shardcron-0"
	pr := renderPod(t, "-pod", pod, "-image", "shardcron="+img,
		"-secret", "shardcron-http-tokens=read="+filepath.Join(dir, "read"),
		"-secret", "shardcron-http-tokens=operate="+filepath.Join(dir, "operate"),
		"-literal", "shardcron-etcd=SHARDCRON_ETCD_ENDPOINTS=http://"+etcd+":2379",
		"-literal", "shardcron-etcd=SHARDCRON_CLUSTER="+prefix)

	// The pod's volumes, each made once and shared by its containers.
	vols := map[string]string{}
	all := append(append([]containerRun{}, pr.InitContainers...), pr.Containers...)
	for _, c := range all {
		if !c.ReadOnlyRoot || c.User <= 0 || len(c.CapDrop) == 0 {
			t.Errorf("container %s: the manifest runs it as %d, read-only root %v, dropping %v; the test expects the locked-down pod", c.Name, c.User, c.ReadOnlyRoot, c.CapDrop)
		}
		for _, m := range c.Files {
			if vols[m.Volume] == "" {
				vols[m.Volume] = seedVolume(t, prefix, img, m)
				checkVolume(t, vols[m.Volume], m)
			}
		}
	}

	// Init containers run to completion, in order, as the kubelet does.
	for _, c := range pr.InitContainers {
		name := prefix + "-" + c.Name
		mustDocker(t, append([]string{"create"}, dockerArgs(prefix, network, pod, c, vols)...)...)
		poll.MustEvery(t, time.Second, 60*time.Second, "init container "+c.Name+" succeeds", func() error {
			if _, err := docker("start", "-a", name); err != nil {
				return fmt.Errorf("%w\n%s", err, containerLog(name))
			}
			return nil
		})
	}
	c := pr.Containers[0]
	name := prefix + "-" + c.Name
	mustDocker(t, append([]string{"run", "-d"}, dockerArgs(prefix, network, pod, c, vols)...)...)
	if c.Readiness == nil {
		t.Fatal("the container has no HTTP readiness probe")
	}
	base, exited := "", ""
	hc := &http.Client{Timeout: 5 * time.Second}
	call := func(method, path, token string) (int, []byte, error) {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes(), err
	}
	took := poll.MustEvery(t, containerEvery, 90*time.Second, "the replica is ready ("+c.Readiness.Path+")", func() error {
		st, err := docker("inspect", "-f", "{{.State.Status}} (exit code {{.State.ExitCode}})", name)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(st, "running") {
			exited = st // it does not come back: nothing restarts it
			return nil
		}
		if base == "" {
			base = fmt.Sprintf("http://%s:%d", ipOn(t, name, network), c.Readiness.Port)
		}
		code, body, err := call(http.MethodGet, c.Readiness.Path, "")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s: %d %s", c.Readiness.Path, code, body)
		}
		return err
	})
	if exited != "" {
		t.Fatalf("the replica stopped before it was ready: %s; its log:\n%s", exited, containerLog(name))
	}
	t.Logf("ready %v after start", took.Round(time.Millisecond))

	// The API: refused without a token, served with the read token; the
	// jobs the init container applied are there, and the operate token
	// (not the read one) triggers one.
	if code, _, err := call(http.MethodGet, "/api/v1/jobs", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/jobs without a token: %d, %v; want 401", code, err)
	}
	code, body, err := call(http.MethodGet, "/api/v1/jobs", readTok)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/jobs with the read token: %d %s, %v", code, body, err)
	}
	var page struct {
		Jobs []struct {
			Name string `json:"name"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &page); err != nil || len(page.Jobs) == 0 {
		t.Fatalf("GET /api/v1/jobs: %s (%v): want the jobs the init container applied", body, err)
	}
	trigger := "/api/v1/jobs/" + page.Jobs[0].Name + "/trigger"
	if code, _, err := call(http.MethodPost, trigger, readTok); err != nil || code != http.StatusForbidden {
		t.Errorf("POST %s with the read token: %d, %v; want 403", trigger, code, err)
	}
	if code, body, err := call(http.MethodPost, trigger, operateTok); err != nil || code/100 != 2 {
		t.Errorf("POST %s with the operate token: %d %s, %v; want 2xx", trigger, code, body, err)
	}
}
