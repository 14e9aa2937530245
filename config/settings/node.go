package settings

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/rebalance"
	"github.com/shardcron/shardcron/scheduler"
	"github.com/shardcron/shardcron/shard"
)

// Defaults and bounds of the node settings that belong to no library
// package. The others are the owners' constants: lease.DefaultTTL,
// lease.DefaultMargin and lease.MinTTL, rebalance.DefaultShards,
// scheduler.DefaultMaxConcurrentRuns and shard.DefaultDrainTimeout.
const (
	DefaultCluster   = "default"
	DefaultDataDir   = "shardcron-data"
	DefaultHTTPAddr  = ":8080"
	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"

	// MaxLeaseTTL bounds how long a crashed replica's shards stay unowned.
	MaxLeaseTTL = time.Hour
	// MaxDrainTimeout bounds a graceful shutdown.
	MaxDrainTimeout = time.Hour
	// MaxConcurrentRunsLimit bounds max_concurrent_runs.
	MaxConcurrentRunsLimit = 1_000_000
)

// Node is one replica's settings: the `server` flags of docs/design.md's public
// contract. Each field is a flag (--lease-ttl), an environment variable
// (SHARDCRON_LEASE_TTL) and a key of the --config file (lease_ttl); see
// ResolveNode for the precedence.
type Node struct {
	// Cluster names the cluster: every key lives under /shardcron/<cluster>/.
	// [a-z0-9][a-z0-9._-]*, at most 63 characters; default "default".
	Cluster string `yaml:"cluster"`
	// NodeID identifies this replica among the cluster's members and must
	// be unique in it; default the host name.
	NodeID string `yaml:"node_id"`
	// EtcdEndpoints are the etcd client URLs. Exactly one of EtcdEndpoints
	// and EmbeddedEtcd is set.
	EtcdEndpoints []string `yaml:"etcd_endpoints"`
	// EmbeddedEtcd runs a single replica with its own etcd in DataDir, on
	// loopback. Several replicas each embedding one would be separate
	// clusters each firing every job, hence one or the other, explicitly.
	EmbeddedEtcd bool `yaml:"embedded_etcd"`
	// DataDir holds the embedded etcd's data; default "shardcron-data".
	DataDir string `yaml:"data_dir"`
	// HTTPAddr serves the dashboard, API, /metrics, /healthz and /readyz;
	// default ":8080" (":0" takes a free port).
	HTTPAddr string `yaml:"http_addr"`
	// LeaseTTL is the node's lease TTL: a crashed replica's shards move
	// within about this long. Whole seconds, at least 2s; default 10s.
	LeaseTTL config.Duration `yaml:"lease_ttl"`
	// LeaseMargin is taken off the lease's expiry to get the safe deadline
	// past which the replica stops acting; at most half the TTL; default 1s.
	LeaseMargin config.Duration `yaml:"lease_margin"`
	// Shards is the number of shards S, used only when the cluster is
	// created (then meta rules); 1 to 65,536; default 1,024.
	Shards int `yaml:"shards"`
	// Jobs is a jobs file that bootstraps an empty cluster's job set; ""
	// for none.
	Jobs string `yaml:"jobs"`
	// MaxConcurrentRuns caps this node's runs across all shards; default 64.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// DrainTimeout bounds waiting for in-flight runs when a shard is
	// released (and so SIGTERM); default 10s.
	DrainTimeout config.Duration `yaml:"drain_timeout"`
	// LogLevel is debug, info, warn or error; default info.
	LogLevel string `yaml:"log_level"`
	// LogFormat is text or json; default text.
	LogFormat string `yaml:"log_format"`
	// EtcdCert and EtcdKey are a client certificate and its key for etcd
	// (both or neither); EtcdCACert verifies etcd's certificate.
	EtcdCert   string `yaml:"etcd_cert"`
	EtcdKey    string `yaml:"etcd_key"`
	EtcdCACert string `yaml:"etcd_cacert"`
	// EtcdUsername and EtcdPassword authenticate to etcd (both or neither).
	// Prefer the environment or a file for the password: flags show in ps.
	EtcdUsername string `yaml:"etcd_username"`
	EtcdPassword string `yaml:"etcd_password"`
	// EtcdPasswordFile names a file whose first line is the etcd password,
	// so that the password sits in neither a process list nor a manifest
	// (SHARDCRON_ETCD_PASSWORD_FILE, --etcd-password-file). ResolveNode
	// reads it into EtcdPassword. Setting it at a level of the precedence
	// overrides etcd_password from a lower level; both at one level is an
	// error.
	EtcdPasswordFile string `yaml:"etcd_password_file"`
	// EtcdCleartextPassword allows sending the etcd password without TLS
	// to an endpoint beyond loopback; refused otherwise.
	EtcdCleartextPassword bool `yaml:"etcd_cleartext_password"`
	// HTTPTLSCert and HTTPTLSKey serve HTTPAddr over TLS (both or neither).
	HTTPTLSCert string `yaml:"http_tls_cert"`
	HTTPTLSKey  string `yaml:"http_tls_key"`
	// HTTPReadTokensFile and HTTPOperateTokensFile name files of bearer
	// tokens, one a line (see package httpauth): read tokens may read the
	// page and the API, operate tokens may also trigger, suspend, resume,
	// drain, and every other request that is not a GET. Either one turns
	// token auth on.
	HTTPReadTokensFile    string `yaml:"http_read_tokens_file"`
	HTTPOperateTokensFile string `yaml:"http_operate_tokens_file"`
	// HTTPOpen lists which of healthz, readyz and metrics stay open when
	// token auth is on; "none" protects them all. Default all three.
	HTTPOpen []string `yaml:"http_open"`
	// InsecureHTTP lets server listen beyond loopback without token auth.
	// Without it, such a server refuses to start: anyone who can reach
	// the port could trigger and suspend jobs.
	InsecureHTTP bool `yaml:"insecure_http"`
	// Exec lets this replica run exec jobs; false refuses them all (their
	// runs fail, saying so). Default true.
	Exec bool `yaml:"exec"`
	// ExecAllow, when not empty, lists the programs exec jobs may start on
	// this replica: a program found with the server's PATH, or an absolute
	// directory ending in "/", compared as files with symlinks evaluated.
	// See runner.ExecPolicy.
	ExecAllow []string `yaml:"exec_allow"`
	// EgressDeny lists networks (CIDRs, or single addresses) http jobs may
	// not connect to, on top of the runner's defaults (link-local and cloud
	// metadata addresses). See runner.EgressPolicy.
	EgressDeny []string `yaml:"egress_deny"`
	// EgressAllow lists networks http jobs may connect to although a deny
	// entry covers them; the longest matching prefix decides.
	EgressAllow []string `yaml:"egress_allow"`
	// ExecEnvAllow, when not empty, lists the variables an exec job's env
	// may set on this replica: names, or prefixes ending in "*"; never
	// PATH. See runner.ExecPolicy.
	ExecEnvAllow []string `yaml:"exec_env_allow"`
	// AdvertiseAddr is the host:port published in this replica's member
	// key, where users and tools reach it; default "": HTTPAddr's bound
	// address, with the host name for an unspecified host (":8080").
	AdvertiseAddr string `yaml:"advertise_addr"`
	// TraceUIURL links the runs' trace ids on the job page: an http(s) URL
	// in which {trace_id} stands for the id (CheckTraceUIURL); "" shows
	// them as text.
	TraceUIURL string `yaml:"trace_ui_url"`
}

// HTTPAuth says whether token auth is on.
func (n Node) HTTPAuth() bool { return n.HTTPReadTokensFile != "" || n.HTTPOperateTokensFile != "" }

// OpenPaths are the HTTP paths HTTPOpen leaves open.
func (n Node) OpenPaths() []string {
	var out []string
	for _, p := range n.HTTPOpen {
		if p != "none" {
			out = append(out, "/"+p)
		}
	}
	return out
}

// IsLoopback says whether the host of a host:port address is a loopback
// address or localhost; "" and the unspecified addresses listen on every
// interface, so they are not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DefaultNode returns the defaults; NodeID is the host name ("" if it cannot
// be read, which Validate rejects).
func DefaultNode() Node {
	host, _ := os.Hostname()
	return Node{
		Cluster:           DefaultCluster,
		NodeID:            host,
		DataDir:           DefaultDataDir,
		HTTPAddr:          DefaultHTTPAddr,
		LeaseTTL:          config.Duration(lease.DefaultTTL),
		LeaseMargin:       config.Duration(lease.DefaultMargin),
		Shards:            rebalance.DefaultShards,
		MaxConcurrentRuns: scheduler.DefaultMaxConcurrentRuns,
		DrainTimeout:      config.Duration(shard.DefaultDrainTimeout),
		LogLevel:          DefaultLogLevel,
		LogFormat:         DefaultLogFormat,
		HTTPOpen:          []string{"healthz", "readyz", "metrics"},
		Exec:              true,
	}
}

var nodeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// Validate checks each setting and how they fit together, and returns
// config.Errors naming each bad setting by its file key, or nil.
func (n Node) Validate() error {
	var errs config.Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &config.Error{Field: key, Msg: fmt.Sprintf(format, args...)})
	}
	n.Client().check(bad)
	if !nodeID.MatchString(n.NodeID) {
		bad("node_id", "%q must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most 253 characters (default: the host name)", n.NodeID)
	}
	switch {
	case len(n.EtcdEndpoints) == 0 && !n.EmbeddedEtcd:
		bad("etcd_endpoints", "no etcd: set --etcd-endpoints (SHARDCRON_ETCD_ENDPOINTS, etcd_endpoints), or --embedded-etcd for a single replica with its own etcd; server will not guess, because several replicas each embedding an etcd would be separate clusters, each firing every job")
	case len(n.EtcdEndpoints) > 0 && n.EmbeddedEtcd:
		bad("embedded_etcd", "embedded_etcd and etcd_endpoints exclude each other")
	}
	if n.EmbeddedEtcd && strings.TrimSpace(n.DataDir) == "" {
		bad("data_dir", "is required with embedded_etcd")
	}
	if _, port, err := net.SplitHostPort(n.HTTPAddr); err != nil {
		bad("http_addr", "%q is not host:port (such as :8080 or 127.0.0.1:0)", n.HTTPAddr)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		bad("http_addr", "%q: the port must be a number from 0 to 65535", n.HTTPAddr)
	}
	if err := CheckAdvertiseAddr(n.AdvertiseAddr); n.AdvertiseAddr != "" && err != nil {
		bad("advertise_addr", "%q: %v", n.AdvertiseAddr, err)
	}
	ttl, margin := n.LeaseTTL.D(), n.LeaseMargin.D()
	switch {
	case ttl < lease.MinTTL:
		bad("lease_ttl", "%v is less than the minimum of %v", n.LeaseTTL, config.Duration(lease.MinTTL))
	case ttl > MaxLeaseTTL:
		bad("lease_ttl", "%v is more than the limit of %v", n.LeaseTTL, config.Duration(MaxLeaseTTL))
	case ttl%time.Second != 0:
		bad("lease_ttl", "%v is not a whole number of seconds (etcd grants whole seconds)", n.LeaseTTL)
	}
	switch {
	case margin < 0:
		bad("lease_margin", "must not be negative")
	case ttl >= lease.MinTTL && margin > ttl/2:
		bad("lease_margin", "%v is more than half the lease TTL (%v): the safe deadline would leave too little of the lease", n.LeaseMargin, n.LeaseTTL)
	}
	if n.Shards < 1 || n.Shards > keyspace.MaxShards {
		bad("shards", "%d is not from 1 to %d", n.Shards, keyspace.MaxShards)
	}
	if n.MaxConcurrentRuns < 1 || n.MaxConcurrentRuns > MaxConcurrentRunsLimit {
		bad("max_concurrent_runs", "%d is not from 1 to %d", n.MaxConcurrentRuns, MaxConcurrentRunsLimit)
	}
	switch d := n.DrainTimeout.D(); {
	case d <= 0:
		bad("drain_timeout", "must be more than 0")
	case d > MaxDrainTimeout:
		bad("drain_timeout", "%v is more than the limit of %v", n.DrainTimeout, config.Duration(MaxDrainTimeout))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, n.LogLevel) {
		bad("log_level", "%q must be one of debug, info, warn, error", n.LogLevel)
	}
	if !slices.Contains([]string{"text", "json"}, n.LogFormat) {
		bad("log_format", "%q must be one of text, json", n.LogFormat)
	}
	n.checkHTTP(bad)
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// checkHTTP checks the HTTP security settings: TLS files in pairs, what
// may stay open, and no unauthenticated listener beyond loopback unless
// insecure_http says so.
func (n Node) checkHTTP(bad func(key, format string, args ...any)) {
	pair(bad, "http_tls_cert", n.HTTPTLSCert, "http_tls_key", n.HTTPTLSKey)
	for _, p := range n.HTTPOpen {
		if !slices.Contains([]string{"healthz", "readyz", "metrics", "none"}, p) {
			bad("http_open", "%q must be healthz, readyz, metrics or none", p)
		}
	}
	if slices.Contains(n.HTTPOpen, "none") && len(n.HTTPOpen) > 1 {
		bad("http_open", "none excludes the others")
	}
	for _, a := range n.ExecAllow {
		if strings.HasSuffix(a, "/") && !strings.HasPrefix(a, "/") {
			bad("exec_allow", "%q: a directory entry must be an absolute path", a)
		}
	}
	for key, list := range map[string][]string{"egress_deny": n.EgressDeny, "egress_allow": n.EgressAllow} {
		for _, c := range list {
			if _, err := ParsePrefix(c); err != nil {
				bad(key, "%q is not a network (a CIDR such as 10.0.0.0/8, or an address)", c)
			}
		}
	}
	for _, e := range n.ExecEnvAllow {
		if name := strings.TrimSuffix(e, "*"); name == "PATH" || (name != "" && !config.IsEnvName(name)) {
			bad("exec_env_allow", "%q: not a variable name or a prefix ending in * (and never PATH: programs are found with the server's PATH)", e)
		}
	}
	if err := CheckTraceUIURL(n.TraceUIURL); err != nil {
		bad("trace_ui_url", "%q: %v", n.TraceUIURL, err)
	}
	if !n.HTTPAuth() && !n.InsecureHTTP && !IsLoopback(n.HTTPAddr) {
		bad("http_addr", "%q listens beyond loopback without token auth, so anyone who reaches it could trigger and suspend jobs: "+
			"set --http-operate-tokens-file and/or --http-read-tokens-file (SHARDCRON_HTTP_OPERATE_TOKENS_FILE, ...), "+
			"or listen on loopback (--http-addr 127.0.0.1:8080), or accept the risk with --insecure-http (SHARDCRON_INSECURE_HTTP=true)", n.HTTPAddr)
	}
}

// LoadNodeFile reads the settings file at path (strict YAML, the keys of
// Node's yaml tags) over DefaultNode. It does not Validate: flags and the
// environment may still complete the settings (ResolveNode validates last).
func LoadNodeFile(path string) (Node, error) {
	n, _, err := loadNodeFileKeys(DefaultNode(), path)
	return n, err
}

// loadNodeFileKeys reads the file at path over n and also says which keys
// the file set, and on which line.
func loadNodeFileKeys(n Node, path string) (Node, map[string]int, error) {
	keys := make([]string, len(nodeSettings))
	for i, s := range nodeSettings {
		keys[i] = s.key
	}
	set := map[string]int{}
	err := config.DecodeFile(path, keys, func(key string, line int, v config.Value) {
		set[key] = line
		nodeSettings[slices.Index(keys, key)].decode(&n, v)
	})
	if err != nil {
		return Node{}, nil, err
	}
	return n, set, nil
}
