//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/internal/poll"
)

// label marks every container and network the suite creates; its value is
// the run's prefix.
const label = "io.shardcron.e2e"

// containerEvery is how often the suite checks a condition: conditions run
// docker or read a cluster in containers.
const containerEvery = 100 * time.Millisecond

// dockerTimeout bounds one docker CLI call: a stop waits for a drain.
const dockerTimeout = 90 * time.Second

// docker runs the docker CLI and returns its trimmed standard output.
func docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// mustDocker is docker, failing the test on an error.
func mustDocker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := docker(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newPrefix names one run: unique, short, valid as a container name.
func newPrefix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "sce2e-" + hex.EncodeToString(b)
}

// removeLabelled removes the containers (with their anonymous volumes) and
// networks labelled with value, or with any value when value is "". A slow
// or failing docker call is retried for up to two minutes, and whatever is
// left then is named in the test log.
func removeLabelled(t testing.TB, value string) {
	filter := "label=" + label
	if value != "" {
		filter += "=" + value
	}
	_, err := poll.UntilEvery(time.Second, 2*time.Minute, func() error {
		ids, err := docker("ps", "-aq", "--filter", filter)
		if err == nil && ids != "" {
			_, err = docker(append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...)
		}
		if err != nil {
			return err
		}
		nets, err := docker("network", "ls", "-q", "--filter", filter)
		if err != nil || nets == "" {
			return err
		}
		for _, n := range strings.Fields(nets) {
			dropStaleEndpoints(n)
		}
		_, err = docker(append([]string{"network", "rm"}, strings.Fields(nets)...)...)
		return err
	})
	if err == nil {
		return
	}
	if stale := onlyStaleNetworks(filter); stale != "" {
		// Not this suite's leftovers but the daemon's: every container is
		// gone, and what holds the network is an endpoint of none of them.
		// The next run's cleanup tries again.
		t.Logf("cleanup of %s: docker keeps stale endpoints on %s (%v); left for the next run", filter, stale, err)
		return
	}
	t.Errorf("cleanup of %s left resources behind: %v", filter, err)
}

// onlyStaleNetworks returns the labelled networks left behind when no
// labelled container is, and every endpoint they list names a container
// that no longer exists; "" otherwise.
func onlyStaleNetworks(filter string) string {
	ids, err := docker("ps", "-aq", "--filter", filter)
	if err != nil || ids != "" {
		return ""
	}
	nets, err := docker("network", "ls", "-q", "--filter", filter)
	if err != nil || nets == "" {
		return ""
	}
	for _, n := range strings.Fields(nets) {
		names, err := docker("network", "inspect", "-f", "{{range .Containers}}{{.Name}} {{end}}", n)
		if err != nil {
			return ""
		}
		for _, c := range strings.Fields(names) {
			if _, err := docker("container", "inspect", c); err == nil {
				return "" // a live container holds it: ours to explain
			}
		}
	}
	return strings.Join(strings.Fields(nets), ", ")
}

// dropStaleEndpoints force-disconnects whatever a network still lists as
// attached once its containers are removed. The daemon can keep such an
// endpoint after a container that was disconnected and reconnected (the
// partition scenario) is removed, and then refuses to remove the network
// ("has active endpoints"); a forced disconnect by the endpoint's name, not
// its ID, clears it (moby/moby#17217, #33156).
func dropStaleEndpoints(network string) {
	names, err := docker("network", "inspect", "-f", "{{range .Containers}}{{.Name}} {{end}}", network)
	if err != nil {
		return
	}
	for _, n := range strings.Fields(names) {
		_, _ = docker("network", "disconnect", "-f", network, n)
	}
}

// saveLogs keeps every container's log of a failed run, and the logs of
// containers it replaced (retired, by file name), in $SHARDCRON_E2E_LOGS
// (default: the system's temporary directory).
func saveLogs(t testing.TB, prefix string, retired map[string][]byte) {
	dir := filepath.Join(cmp.Or(os.Getenv("SHARDCRON_E2E_LOGS"), os.TempDir()), prefix)
	names, err := docker("ps", "-a", "--filter", "label="+label+"="+prefix, "--format", "{{.Names}}")
	if err != nil || os.MkdirAll(dir, 0o755) != nil {
		return
	}
	for _, n := range strings.Fields(names) {
		_ = os.WriteFile(filepath.Join(dir, n+".log"), containerLog(n), 0o644)
	}
	for n, log := range retired {
		_ = os.WriteFile(filepath.Join(dir, n+".log"), log, 0o644)
	}
	t.Logf("container logs of the failed run: %s", dir)
}

// containerLog returns a container's log with the daemon's timestamps, or
// what docker said instead.
func containerLog(name string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "docker", "logs", "-t", name).CombinedOutput()
	return out
}

// image names an image from the environment `make e2e` sets.
func image(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Fatalf("%s is not set: run the suite with `make e2e`, which builds the images", env)
	}
	if _, err := docker("image", "inspect", "-f", "{{.Id}}", v); err != nil {
		t.Fatalf("%s=%s: %v", env, v, err)
	}
	return v
}

// ipOn returns a container's address on one network.
func ipOn(t testing.TB, container, network string) string {
	t.Helper()
	ip := mustDocker(t, "inspect", "-f", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", network), container)
	if ip == "" || ip == "<no value>" {
		t.Fatalf("%s has no address on %s", container, network)
	}
	return ip
}
