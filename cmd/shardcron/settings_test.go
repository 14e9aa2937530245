package main

import (
	"strings"
	"testing"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// TestClientCommandsReadTheSettingsFile: apply, export and status take
// --config, the same file as server (server-only keys included), with the
// same precedence; an empty variable counts as unset, as it does for server
// (etcdconn.go used to take an empty SHARDCRON_ETCD_ENDPOINTS as a value).
func TestClientCommandsReadTheSettingsFile(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t)
	settings := writeFile(t, "shardcron.yaml", "cluster: from-file\netcd_endpoints: ["+etcd.Endpoint()+"]\nlease_ttl: 3s\nshards: 16\n")
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - {name: filed, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n")
	empty := []string{"SHARDCRON_CLUSTER=", "SHARDCRON_ETCD_ENDPOINTS=", "SHARDCRON_ETCD_PASSWORD=", "SHARDCRON_LEASE_TTL=bad"}
	if out, stderr, code := runCLI(t, empty, "apply", "--config", settings, "-f", jobs); code != 0 || !strings.Contains(out, "applied version") {
		t.Fatalf("apply --config: exit %d\n%s%s", code, out, stderr)
	}
	// The job set went to the file's cluster: export from it with the file
	// named by SHARDCRON_CONFIG finds it, and a flag overrides the file.
	byEnv := append(empty, "SHARDCRON_CONFIG="+settings)
	if out, stderr, code := runCLI(t, byEnv, "export"); code != 0 || !strings.Contains(out, "filed") {
		t.Fatalf("export with SHARDCRON_CONFIG: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, byEnv, "export", "--cluster", "other"); strings.Contains(out, "filed") {
		t.Fatalf("export --cluster other found the file cluster's jobs: exit %d\n%s%s", code, out, stderr)
	}
	// The environment wins over the file.
	if out, stderr, code := runCLI(t, append(byEnv, "SHARDCRON_CLUSTER=other"), "export"); strings.Contains(out, "filed") {
		t.Fatalf("SHARDCRON_CLUSTER=other found the file cluster's jobs: exit %d\n%s%s", code, out, stderr)
	}
	// A bad setting is a usage error naming it.
	if _, stderr, code := runCLI(t, byEnv, "status", "--cluster", "Not Valid"); code != 2 || !strings.Contains(stderr, `flag --cluster`) {
		t.Fatalf("status --cluster 'Not Valid': exit %d\n%s", code, stderr)
	}
}
