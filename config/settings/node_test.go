package settings

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/shard"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResolveNodePrecedence: flag > environment > file > default, setting by
// setting, including --config itself (flag over SHARDCRON_CONFIG).
func TestResolveNodePrecedence(t *testing.T) {
	file := writeFile(t, "cluster: from-file\nlease_ttl: 20s\nshards: 256\netcd_endpoints: [http://file-etcd:2379]\nlog_level: warn\nembedded_etcd: false\n")
	other := writeFile(t, "cluster: other-file\netcd_endpoints: http://a:2379, http://b:2379\n")
	tests := []struct {
		name  string
		flags []string
		env   map[string]string
		check func(t *testing.T, n Node)
	}{
		{"defaults need an etcd", []string{"--embedded-etcd"}, nil, func(t *testing.T, n Node) {
			want := DefaultNode()
			want.EmbeddedEtcd = true
			want.HTTPAddr = "127.0.0.1:8080"
			if !reflect.DeepEqual(n, want) {
				t.Fatalf("got %+v, want %+v", n, want)
			}
		}},
		{"file over default", []string{"--config", file}, nil, func(t *testing.T, n Node) {
			if n.Cluster != "from-file" || n.LeaseTTL.D() != 20*time.Second || n.Shards != 256 || n.LogLevel != "warn" || n.DrainTimeout.D() != shard.DefaultDrainTimeout {
				t.Fatalf("%+v", n)
			}
		}},
		{"env over file", []string{"--config", file}, map[string]string{"SHARDCRON_CLUSTER": "from-env", "SHARDCRON_LEASE_TTL": "30s", "SHARDCRON_ETCD_ENDPOINTS": "http://e1:2379,http://e2:2379"}, func(t *testing.T, n Node) {
			if n.Cluster != "from-env" || n.LeaseTTL.D() != 30*time.Second || n.Shards != 256 || !reflect.DeepEqual(n.EtcdEndpoints, []string{"http://e1:2379", "http://e2:2379"}) {
				t.Fatalf("%+v", n)
			}
		}},
		{"flag over env over file", []string{"--config", file, "--cluster", "from-flag", "--shards", "64"}, map[string]string{"SHARDCRON_CLUSTER": "from-env", "SHARDCRON_SHARDS": "128", "SHARDCRON_LOG_LEVEL": "debug"}, func(t *testing.T, n Node) {
			if n.Cluster != "from-flag" || n.Shards != 64 || n.LogLevel != "debug" || n.LeaseTTL.D() != 20*time.Second {
				t.Fatalf("%+v", n)
			}
		}},
		{"flag set to its default still wins", []string{"--config", file, "--lease-ttl", "10s"}, map[string]string{"SHARDCRON_LEASE_TTL": "30s"}, func(t *testing.T, n Node) {
			if n.LeaseTTL.D() != 10*time.Second {
				t.Fatalf("%+v", n)
			}
		}},
		{"empty env is unset", []string{"--config", file}, map[string]string{"SHARDCRON_CLUSTER": ""}, func(t *testing.T, n Node) {
			if n.Cluster != "from-file" {
				t.Fatalf("%+v", n)
			}
		}},
		{"config from env", nil, map[string]string{"SHARDCRON_CONFIG": other}, func(t *testing.T, n Node) {
			if n.Cluster != "other-file" || len(n.EtcdEndpoints) != 2 {
				t.Fatalf("%+v", n)
			}
		}},
		{"config flag over env", []string{"--config", file}, map[string]string{"SHARDCRON_CONFIG": other}, func(t *testing.T, n Node) {
			if n.Cluster != "from-file" {
				t.Fatalf("%+v", n)
			}
		}},
		{"every kind from env", []string{"--embedded-etcd=false"}, map[string]string{
			"SHARDCRON_NODE_ID": "node-7", "SHARDCRON_ETCD_ENDPOINTS": "etcd:2379", "SHARDCRON_EMBEDDED_ETCD": "true",
			"SHARDCRON_MAX_CONCURRENT_RUNS": "5", "SHARDCRON_DRAIN_TIMEOUT": "3s", "SHARDCRON_ETCD_USERNAME": "u", "SHARDCRON_ETCD_PASSWORD": "p",
			"SHARDCRON_ETCD_CLEARTEXT_PASSWORD": "true",
		}, func(t *testing.T, n Node) {
			if n.NodeID != "node-7" || n.EmbeddedEtcd || n.MaxConcurrentRuns != 5 || n.DrainTimeout.D() != 3*time.Second || n.EtcdPassword != "p" || !n.EtcdCleartextPassword {
				t.Fatalf("%+v", n)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
			BindNodeFlags(fs)
			if err := fs.Parse(append(tc.flags, "--http-addr", "127.0.0.1:8080")); err != nil {
				t.Fatal(err)
			}
			n, err := ResolveNode(fs, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, n)
		})
	}
}

func TestResolveNodeErrors(t *testing.T) {
	bad := writeFile(t, "cluster: x\nlease_tll: 10s\nshards: many\nshards: 2\n")
	zeroShards := writeFile(t, "cluster: x\nshards: 0\n")
	tests := []struct {
		flags []string
		env   map[string]string
		want  string
	}{
		{[]string{"--config", bad}, nil, bad + ":2: field \"lease_tll\": unknown field (did you mean \"lease_ttl\"?)\n" +
			bad + ":3: field \"shards\": must be a whole number, found \"many\"\n" +
			bad + ":4: field \"shards\": duplicate key (first at line 3)"},
		{[]string{"--config", "/nonexistent/node.yaml"}, nil, "flag --config: /nonexistent/node.yaml: no such file or directory"},
		{nil, map[string]string{"SHARDCRON_CONFIG": "/nonexistent/node.yaml"}, "environment SHARDCRON_CONFIG: /nonexistent/node.yaml: no such file or directory"},
		{[]string{"--embedded-etcd"}, map[string]string{"SHARDCRON_LEASE_TTL": "ten", "SHARDCRON_SHARDS": "x"},
			"environment SHARDCRON_LEASE_TTL: \"ten\" is not a duration such as 30s, 5m or 1h30m\nenvironment SHARDCRON_SHARDS: \"x\" is not a whole number"},
		{nil, nil, `field "etcd_endpoints": no etcd: set --etcd-endpoints (SHARDCRON_ETCD_ENDPOINTS, etcd_endpoints), or --embedded-etcd for a single replica with its own etcd; server will not guess, because several replicas each embedding an etcd would be separate clusters, each firing every job`},
		{[]string{"--embedded-etcd", "--lease-ttl", "4s", "--lease-margin", "3s"}, nil, `flag --lease-margin: 3s is more than half the lease TTL (4s): the safe deadline would leave too little of the lease`},
		{[]string{"--embedded-etcd"}, map[string]string{"SHARDCRON_LEASE_TTL": "1s"}, `environment SHARDCRON_LEASE_TTL: 1s is less than the minimum of 2s`},
		{[]string{"--embedded-etcd", "--config", zeroShards}, nil, zeroShards + `:2: field "shards": 0 is not from 1 to 65536`},
		{[]string{"--embedded-etcd", "--lease-margin", "-1s"}, nil, `flag --lease-margin: -1s is negative`},
	}
	for _, tc := range tests {
		fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
		BindNodeFlags(fs)
		if err := fs.Parse(append(tc.flags, "--insecure-http")); err != nil {
			t.Fatal(err)
		}
		_, err := ResolveNode(fs, func(k string) string { return tc.env[k] })
		if err == nil || err.Error() != tc.want || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("flags %v env %v:\n got: %v\nwant: %s", tc.flags, tc.env, err, tc.want)
		}
	}
}

func TestNodeValidate(t *testing.T) {
	ok := DefaultNode()
	ok.NodeID = "node-1"
	ok.EtcdEndpoints = []string{"http://127.0.0.1:2379"}
	ok.HTTPAddr = "127.0.0.1:8080"
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid settings: %v", err)
	}
	tests := []struct {
		mod  func(*Node)
		want string
	}{
		{func(n *Node) { n.Cluster = "Prod" }, `field "cluster": cluster name "Prod": must match`},
		{func(n *Node) { n.NodeID = "" }, `field "node_id": "" must match`},
		{func(n *Node) { n.NodeID = "a/b" }, `field "node_id": "a/b" must match`},
		{func(n *Node) { n.EmbeddedEtcd = true }, `field "embedded_etcd": embedded_etcd and etcd_endpoints exclude each other`},
		{func(n *Node) { n.EtcdEndpoints = []string{"ftp://x:1"} }, `the scheme must be http, https, unix or unixs`},
		{func(n *Node) { n.EtcdEndpoints = []string{"etcd"} }, `an endpoint is host:port or a URL`},
		{func(n *Node) { n.EtcdEndpoints = nil; n.EmbeddedEtcd = true; n.DataDir = "" }, `field "data_dir": is required with embedded_etcd`},
		{func(n *Node) { n.HTTPAddr = "8080" }, `field "http_addr": "8080" is not host:port`},
		{func(n *Node) { n.HTTPAddr = ":http" }, `the port must be a number`},
		{func(n *Node) { n.AdvertiseAddr = "[::]:8080" }, `field "advertise_addr": "[::]:8080": the host must be one others can reach`},
		{func(n *Node) { n.AdvertiseAddr = ":8080" }, `field "advertise_addr": ":8080": the host must be one others can reach`},
		{func(n *Node) { n.AdvertiseAddr = "node-1" }, `field "advertise_addr": "node-1": not host:port`},
		{func(n *Node) { n.AdvertiseAddr = "node-1:0" }, `field "advertise_addr": "node-1:0": the port must be a number from 1 to 65535`},
		{func(n *Node) { n.LeaseTTL = config.Duration(time.Second) }, `field "lease_ttl": 1s is less than the minimum of 2s`},
		{func(n *Node) { n.LeaseTTL = config.Duration(2500 * time.Millisecond) }, `not a whole number of seconds`},
		{func(n *Node) { n.LeaseTTL = config.Duration(2 * time.Hour) }, `more than the limit of 1h`},
		{func(n *Node) {
			n.LeaseTTL = config.Duration(2 * time.Second)
			n.LeaseMargin = config.Duration(1001 * time.Millisecond)
		}, `more than half the lease TTL`},
		{func(n *Node) { n.Shards = 0 }, `field "shards": 0 is not from 1 to 65536`},
		{func(n *Node) { n.Shards = 65537 }, `field "shards": 65537 is not from 1 to 65536`},
		{func(n *Node) { n.MaxConcurrentRuns = 0 }, `field "max_concurrent_runs": 0 is not from 1`},
		{func(n *Node) { n.DrainTimeout = 0 }, `field "drain_timeout": must be more than 0`},
		{func(n *Node) { n.LogLevel = "verbose" }, `field "log_level": "verbose" must be one of debug, info, warn, error`},
		{func(n *Node) { n.LogFormat = "xml" }, `field "log_format": "xml" must be one of text, json`},
		{func(n *Node) { n.EtcdCert = "c.pem" }, `field "etcd_cert": etcd_cert and etcd_key go together`},
		{func(n *Node) { n.EtcdPassword = "p" }, `field "etcd_password": etcd_username and etcd_password go together`},
		{func(n *Node) { n.HTTPTLSKey = "k.pem" }, `field "http_tls_key": http_tls_cert and http_tls_key go together`},
		{func(n *Node) { n.HTTPOpen = []string{"healthz", "api"} }, `field "http_open": "api" must be healthz, readyz, metrics or none`},
		{func(n *Node) { n.HTTPOpen = []string{"none", "metrics"} }, `none excludes the others`},
		{func(n *Node) { n.HTTPAddr = ":8080" }, `field "http_addr": ":8080" listens beyond loopback without token auth`},
		{func(n *Node) { n.HTTPAddr = "0.0.0.0:8080"; n.HTTPTLSCert, n.HTTPTLSKey = "c", "k" }, `listens beyond loopback without token auth`},
		{func(n *Node) { n.HTTPAddr = "[::]:8080" }, `listens beyond loopback without token auth`},
		{func(n *Node) { n.HTTPAddr = "shardcron.example:8080" }, `listens beyond loopback without token auth`},
		{func(n *Node) { n.ExecAllow = []string{"bin/"} }, `field "exec_allow": "bin/": a directory entry must be an absolute path`},
		{func(n *Node) { n.TraceUIURL = "https://jaeger.example/trace/" }, `field "trace_ui_url": "https://jaeger.example/trace/": holds no {trace_id}`},
		{func(n *Node) { n.TraceUIURL = "jaeger/trace/{trace_id}" }, `want an absolute http:// or https:// URL`},
		{func(n *Node) { n.TraceUIURL = "javascript:alert({trace_id})" }, `want an absolute http:// or https:// URL`},
	}
	for _, tc := range tests {
		n := ok
		n.EtcdEndpoints = slicesClone(ok.EtcdEndpoints)
		tc.mod(&n)
		err := n.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	// Beyond loopback is fine with token auth, or when told so.
	for _, mod := range []func(*Node){
		func(n *Node) { n.HTTPAddr, n.HTTPOperateTokensFile = ":8080", "/tokens" },
		func(n *Node) { n.HTTPAddr, n.HTTPReadTokensFile = "10.0.0.1:8080", "/tokens" },
		func(n *Node) { n.HTTPAddr, n.InsecureHTTP = ":8080", true },
		func(n *Node) { n.HTTPAddr = "localhost:0" },
		func(n *Node) { n.HTTPAddr = "[::1]:8080" },
	} {
		n := ok
		mod(&n)
		if err := n.Validate(); err != nil {
			t.Errorf("%s: %v", n.HTTPAddr, err)
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestBindNodeFlagsHelp: every setting has a flag whose help names its
// environment variable, and --config's help states the precedence.
func TestBindNodeFlagsHelp(t *testing.T) {
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	BindNodeFlags(fs)
	for _, s := range nodeSettings {
		f := fs.Lookup(s.flag())
		if f == nil || !strings.Contains(f.Usage, s.env()) {
			t.Errorf("flag --%s missing or its help lacks %s", s.flag(), s.env())
		}
	}
	if f := fs.Lookup("config"); f == nil || !strings.Contains(f.Usage, "flag wins over the environment") {
		t.Error("--config help does not state the precedence")
	}
	if got := fs.Lookup("lease-ttl").DefValue; got != "10s" {
		t.Errorf("--lease-ttl default %q", got)
	}
	// Every Node field has a setting.
	if got, want := len(nodeSettings), reflect.TypeFor[Node]().NumField(); got != want {
		t.Errorf("%d settings for %d Node fields", got, want)
	}
}

func TestLoadNodeFileRoundTrip(t *testing.T) {
	path := writeFile(t, `# every key
cluster: prod
node_id: node-1
etcd_endpoints: [https://etcd-0:2379, https://etcd-1:2379]
embedded_etcd: false
data_dir: /var/lib/shardcron
http_addr: 0.0.0.0:9090
lease_ttl: 6s
lease_margin: 2s
shards: 4096
jobs: /etc/shardcron/jobs.yaml
max_concurrent_runs: 200
drain_timeout: 30s
log_level: debug
log_format: json
etcd_cert: /tls/client.pem
etcd_key: /tls/client-key.pem
etcd_cacert: /tls/ca.pem
etcd_username: shardcron
etcd_password: hunter2
http_tls_cert: /tls/http.pem
http_tls_key: /tls/http-key.pem
http_read_tokens_file: /secrets/read-tokens
http_operate_tokens_file: /secrets/operate-tokens
http_open: [healthz]
insecure_http: false
exec: false
exec_allow: [/usr/local/bin/, /usr/bin/true]
egress_deny: [127.0.0.0/8, "::1"]
egress_allow: [169.254.169.254]
exec_env_allow: [LANG, LC_*]
advertise_addr: node-1.example:9090
trace_ui_url: https://jaeger.example/trace/{trace_id}
`)
	n, err := LoadNodeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Node{"prod", "node-1", []string{"https://etcd-0:2379", "https://etcd-1:2379"}, false, "/var/lib/shardcron", "0.0.0.0:9090",
		config.Duration(6 * time.Second), config.Duration(2 * time.Second), 4096, "/etc/shardcron/jobs.yaml", 200, config.Duration(30 * time.Second),
		"debug", "json", "/tls/client.pem", "/tls/client-key.pem", "/tls/ca.pem", "shardcron", "hunter2", "", false,
		"/tls/http.pem", "/tls/http-key.pem", "/secrets/read-tokens", "/secrets/operate-tokens", []string{"healthz"}, false,
		false, []string{"/usr/local/bin/", "/usr/bin/true"},
		[]string{"127.0.0.0/8", "::1"}, []string{"169.254.169.254"}, []string{"LANG", "LC_*"},
		"node-1.example:9090", "https://jaeger.example/trace/{trace_id}"}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("got  %+v\nwant %+v", n, want)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
}
