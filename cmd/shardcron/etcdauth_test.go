package main

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/replica"
)

// secureEtcd starts a real etcd process that serves clients only over TLS
// with client certificates from a CA generated for the test, and with auth
// enabled: a user "shardcron" whose role may read and write /shardcron/
// and nothing else. It returns the process, the certificates and the
// user's password.
func secureEtcd(t *testing.T) (*etcdtest.Process, *etcdtest.Certs, string) {
	t.Helper()
	certs := etcdtest.GenerateCerts(t)
	etcd := etcdtest.StartProcessWith(t, etcdtest.ProcessOptions{TLS: certs})
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, TLS: certs.ClientTLS(t), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const password = "etcd-pw-marker-7d1f"
	steps := []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw-unused-elsewhere"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "shardcron"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "shardcron", "/shardcron/", clientv3.GetPrefixRangeEnd("/shardcron/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "shardcron", password); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "shardcron", "shardcron"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup step %d: %v", i, err)
		}
	}
	return etcd, certs, password
}

// TestEtcdTLSAndAuth: server, apply, export and status reach an etcd that
// takes only TLS with client certificates and a user's password, read from
// a file (flag or SHARDCRON_ETCD_PASSWORD_FILE) so it is in no process
// list; the user may touch only /shardcron/, which is all a replica needs.
// Without the certificate, with another CA's certificate, without trusting
// etcd's CA, or with a wrong password, every command fails, and no message
// holds the password.
func TestEtcdTLSAndAuth(t *testing.T) {
	besideOthers(t)
	etcd, certs, password := secureEtcd(t)
	pwFile := writeFile(t, "etcd-password", password+"\n")
	tlsEnv := []string{
		"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=secure",
		"SHARDCRON_ETCD_CACERT=" + certs.CA, "SHARDCRON_ETCD_CERT=" + certs.ClientCert, "SHARDCRON_ETCD_KEY=" + certs.ClientKey,
	}
	env := append(tlsEnv[:len(tlsEnv):len(tlsEnv)], "SHARDCRON_ETCD_USERNAME=shardcron", "SHARDCRON_ETCD_PASSWORD_FILE="+pwFile)

	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - {name: guarded, schedule: \"@every 1m\", exec: {command: [\"true\"]}}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 || !strings.Contains(out, "applied version") {
		t.Fatalf("apply over TLS with auth: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runCLI(t, env, "export"); code != 0 || !strings.Contains(out, "guarded") {
		t.Fatalf("export over TLS with auth: exit %d\n%s%s", code, out, stderr)
	}
	// The server takes the same settings as flags (the password still from
	// a file).
	srv := startProc(t, "server", "server", "--cluster", "secure", "--node-id", "solo", "--http-addr", "127.0.0.1:0",
		"--lease-ttl", "3s", "--shards", "8", "--etcd-endpoints", etcd.Endpoint(),
		"--etcd-cacert", certs.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey,
		"--etcd-username", "shardcron", "--etcd-password-file", pwFile)
	addr := srv.HTTPAddr(30 * time.Second)
	var rep replica.Status
	poll.MustEvery(t, procEvery, 30*time.Second, "status over TLS with auth shows every shard owned by solo", poll.True(func() bool {
		out, _, code := runCLI(t, env, "status", "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &rep) == nil && rep.Unowned == 0 && len(rep.Members) == 1 && rep.Members[0].Owned == 8
	}))
	poll.MustEvery(t, procEvery, 30*time.Second, "/readyz ready", poll.True(func() bool { return httpGet(t, addr, "/readyz") == "ready\n" }))
	if rep.JobsTotal != 1 || rep.Jobs[0].Owner != "solo" {
		t.Errorf("status jobs = %+v", rep.Jobs)
	}

	wrongPw := writeFile(t, "wrong", "not-the-password-marker-99\n")
	for _, tc := range []struct {
		name string
		env  []string
		want string // the reason, in the error
	}{
		{"no client certificate", []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=secure", "SHARDCRON_ETCD_CACERT=" + certs.CA, "SHARDCRON_ETCD_USERNAME=shardcron", "SHARDCRON_ETCD_PASSWORD_FILE=" + pwFile}, "certificate required"},
		{"a certificate from another CA", []string{"SHARDCRON_ETCD_ENDPOINTS=" + etcd.Endpoint(), "SHARDCRON_CLUSTER=secure", "SHARDCRON_ETCD_CACERT=" + certs.CA, "SHARDCRON_ETCD_CERT=" + certs.RogueCert, "SHARDCRON_ETCD_KEY=" + certs.RogueKey}, "unknown certificate authority"},
		{"etcd's CA not trusted", append(env[:len(env):len(env)], "SHARDCRON_ETCD_CACERT="+certs.OtherCA), "certificate signed by unknown authority"},
		{"certificate without a password (its CN is no etcd user)", tlsEnv, "permission denied"},
		{"wrong password", append(tlsEnv[:len(tlsEnv):len(tlsEnv)], "SHARDCRON_ETCD_USERNAME=shardcron", "SHARDCRON_ETCD_PASSWORD_FILE="+wrongPw), "invalid user ID or password"},
	} {
		out, stderr, code := runCLI(t, tc.env, "status", "--timeout", "5s")
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: stderr does not say %q:\n%s", tc.name, tc.want, stderr)
		}
		if code == 0 {
			t.Errorf("%s: status succeeded:\n%s", tc.name, out)
		}
		if strings.Contains(out+stderr, password) || strings.Contains(out+stderr, "not-the-password-marker-99") {
			t.Errorf("%s: the output holds a password:\n%s%s", tc.name, out, stderr)
		}
	}
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Errorf("SIGTERM: exit %d, %v", code, err)
	}
	if srv.log.Contains(password) {
		t.Error("the server's log holds the etcd password")
	}
}

// TestEtcdClearTransportRefused: etcd TLS files with an http:// endpoint
// are refused (exit 2, naming the setting) by server and the client
// commands alike, instead of connecting in clear with the files silently
// ignored; a password bound for an endpoint beyond loopback without TLS is
// refused unless --etcd-cleartext-password accepts it.
func TestEtcdClearTransportRefused(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.Start(t) // plain http on loopback
	certs := etcdtest.GenerateCerts(t)
	tlsArgs := []string{"--etcd-endpoints", etcd.Endpoint(), "--etcd-cacert", certs.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey}
	for _, args := range [][]string{
		append([]string{"status", "--cluster", "cleartls", "--timeout", "5s"}, tlsArgs...),
		append([]string{"server", "--cluster", "cleartls", "--node-id", "n1", "--http-addr", "127.0.0.1:0"}, tlsArgs...),
	} {
		code, stderr := runBad(t, nil, args...)
		if code != 2 || !strings.Contains(stderr, "--etcd-cacert") || !strings.Contains(stderr, "https://") {
			t.Errorf("%s with TLS files and %s: exit %d, want 2 naming --etcd-cacert:\n%s", args[0], etcd.Endpoint(), code, stderr)
		}
	}
	pwFile := writeFile(t, "pw", "clear-pw-marker-31337\n")
	clear := []string{"status", "--cluster", "clearpw", "--timeout", "3s", "--etcd-endpoints", "http://192.0.2.10:2379",
		"--etcd-username", "shardcron", "--etcd-password-file", pwFile}
	code, stderr := runBad(t, nil, clear...)
	if code != 2 || !strings.Contains(stderr, "in clear") || !strings.Contains(stderr, "--etcd-cleartext-password") || strings.Contains(stderr, "clear-pw-marker") {
		t.Errorf("password over http beyond loopback: exit %d, want 2 saying so:\n%s", code, stderr)
	}
	// Accepted explicitly, it gets as far as dialling (192.0.2.0/24 answers
	// nothing): exit 1, not a usage error.
	code, stderr = runBad(t, nil, append(clear, "--etcd-cleartext-password")...)
	if code != 1 || strings.Contains(stderr, "in clear") {
		t.Errorf("--etcd-cleartext-password: exit %d, want 1 (etcd unreachable):\n%s", code, stderr)
	}
}
