package settings

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
)

// ConfigFlag is the flag (and SHARDCRON_CONFIG the variable) naming the
// settings file.
const ConfigFlag = "config"

// EnvPrefix starts the environment variable of every setting.
const EnvPrefix = "SHARDCRON_"

// Precedence says, for help texts, which source of a setting wins.
const Precedence = "a flag wins over the environment variable SHARDCRON_<FLAG> (upper snake case), which wins over the --config file, which wins over the default"

// Scope says which commands take a setting: server alone, or server and
// every client command (apply, export, status, ...), which need only the
// cluster and the way to etcd.
type Scope int

// The scopes of the settings table.
const (
	ServerOnly Scope = iota // server
	Shared                  // server and every client command
)

// setting is one node setting: its file key, from which the flag name
// (kebab case) and environment variable (SHARDCRON_ + upper case) follow,
// its help text, the field it sets and which commands take it.
type setting struct {
	key   string
	help  string
	field func(*Node) any // *string, *bool, *int, *config.Duration or *[]string
	scope Scope
}

func (s setting) flag() string { return strings.ReplaceAll(s.key, "_", "-") }
func (s setting) env() string  { return EnvPrefix + strings.ToUpper(s.key) }

var nodeSettings = []setting{
	{"cluster", "cluster name: every key lives under /shardcron/<cluster>/", func(n *Node) any { return &n.Cluster }, Shared},
	{"node_id", "this replica's id, unique in the cluster (default: the host name)", func(n *Node) any { return &n.NodeID }, ServerOnly},
	{"etcd_endpoints", "etcd endpoints, comma separated (server: or --embedded-etcd)", func(n *Node) any { return &n.EtcdEndpoints }, Shared},
	{"embedded_etcd", "run a single replica with its own etcd in --data-dir, on loopback", func(n *Node) any { return &n.EmbeddedEtcd }, ServerOnly},
	{"data_dir", "directory of the embedded etcd's data", func(n *Node) any { return &n.DataDir }, ServerOnly},
	{"http_addr", "address of the dashboard, API, /metrics, /healthz and /readyz (:0 for a free port)", func(n *Node) any { return &n.HTTPAddr }, ServerOnly},
	{"advertise_addr", "host:port published in the member list, where users reach this replica (default: the bound --http-addr, with the host name for an unspecified host)", func(n *Node) any { return &n.AdvertiseAddr }, ServerOnly},
	{"lease_ttl", "lease TTL, whole seconds, at least 2s: a crashed replica's shards move within about this long", func(n *Node) any { return &n.LeaseTTL }, ServerOnly},
	{"lease_margin", "taken off the lease expiry for the safe deadline; at most half the TTL", func(n *Node) any { return &n.LeaseMargin }, ServerOnly},
	{"shards", "number of shards, used only when the cluster is created", func(n *Node) any { return &n.Shards }, ServerOnly},
	{"jobs", "jobs file bootstrapping an empty cluster's job set (otherwise drift is reported)", func(n *Node) any { return &n.Jobs }, ServerOnly},
	{"max_concurrent_runs", "cap on this replica's runs across all shards", func(n *Node) any { return &n.MaxConcurrentRuns }, ServerOnly},
	{"drain_timeout", "bound on draining a shard's runs when it is released (and on SIGTERM)", func(n *Node) any { return &n.DrainTimeout }, ServerOnly},
	{"log_level", "debug, info, warn or error", func(n *Node) any { return &n.LogLevel }, ServerOnly},
	{"log_format", "text or json", func(n *Node) any { return &n.LogFormat }, ServerOnly},
	{"etcd_cert", "client certificate for etcd", func(n *Node) any { return &n.EtcdCert }, Shared},
	{"etcd_key", "client key for etcd", func(n *Node) any { return &n.EtcdKey }, Shared},
	{"etcd_cacert", "CA bundle that verifies etcd's certificate", func(n *Node) any { return &n.EtcdCACert }, Shared},
	{"etcd_username", "etcd user", func(n *Node) any { return &n.EtcdUsername }, Shared},
	{"etcd_password", "etcd password; prefer --etcd-password-file (flags and environments show in ps and manifests)", func(n *Node) any { return &n.EtcdPassword }, Shared},
	{"etcd_password_file", "file whose first line is the etcd password", func(n *Node) any { return &n.EtcdPasswordFile }, Shared},
	{"etcd_cleartext_password", "allow sending the etcd password without TLS to an endpoint beyond loopback", func(n *Node) any { return &n.EtcdCleartextPassword }, Shared},
	{"http_tls_cert", "certificate (PEM, chain first) to serve HTTP over TLS", func(n *Node) any { return &n.HTTPTLSCert }, ServerOnly},
	{"http_tls_key", "key of --http-tls-cert", func(n *Node) any { return &n.HTTPTLSKey }, ServerOnly},
	{"http_read_tokens_file", "file of bearer tokens (one a line) that may read the page and API", func(n *Node) any { return &n.HTTPReadTokensFile }, ServerOnly},
	{"http_operate_tokens_file", "file of bearer tokens (one a line) that may also trigger, suspend, resume, drain: every request but GET", func(n *Node) any { return &n.HTTPOperateTokensFile }, ServerOnly},
	{"http_open", "with token auth, which of healthz, readyz, metrics stay open (none: protect all)", func(n *Node) any { return &n.HTTPOpen }, ServerOnly},
	{"insecure_http", "allow listening beyond loopback without token auth", func(n *Node) any { return &n.InsecureHTTP }, ServerOnly},
	{"exec", "run exec jobs on this replica (false: refuse them all)", func(n *Node) any { return &n.Exec }, ServerOnly},
	{"exec_allow", "programs exec jobs may start here: a program found with the server's PATH, or a directory ending in /; symlinks evaluated (default: any)", func(n *Node) any { return &n.ExecAllow }, ServerOnly},
	{"egress_deny", "networks http jobs may not connect to, CIDRs or addresses, checked on the resolved address of every connection and redirect; added to the default 169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, 0.0.0.0/8, :: (deny loopback with 127.0.0.0/8,::1)", func(n *Node) any { return &n.EgressDeny }, ServerOnly},
	{"egress_allow", "networks http jobs may connect to although a deny covers them (the longest matching prefix decides; allow wins a tie)", func(n *Node) any { return &n.EgressAllow }, ServerOnly},
	{"exec_env_allow", "variables exec jobs' env may set here: names, or prefixes ending in * (default: any but PATH; with --exec-allow, none that loads code such as LD_*, BASH_ENV, PYTHON*)", func(n *Node) any { return &n.ExecEnvAllow }, ServerOnly},
	{"trace_ui_url", "URL of a run's trace in your trace UI, {trace_id} standing for its id (https://jaeger.example/trace/{trace_id}): the job page links trace ids there", func(n *Node) any { return &n.TraceUIURL }, ServerOnly},
}

// secretFiles pairs a secret setting with the setting naming a file that
// holds it. The two are one setting for the precedence: the higher level
// wins whichever spelling it uses, and one level may not set both.
var secretFiles = [][2]string{{"etcd_password", "etcd_password_file"}}

// BindNodeFlags defines --config and a flag for every Node setting on fs,
// with DefaultNode's values as defaults and help naming each flag's
// environment variable: the flags of `server`.
func BindNodeFlags(fs *pflag.FlagSet) { bindFlags(fs, ServerOnly) }

// BindClientFlags defines --config and the flags of the Shared settings (the
// cluster and the way to etcd): the flags of every client command.
func BindClientFlags(fs *pflag.FlagSet) { bindFlags(fs, Shared) }

// bindFlags binds the settings whose scope is at least min.
func bindFlags(fs *pflag.FlagSet, min Scope) {
	def := DefaultNode()
	fs.String(ConfigFlag, "", "YAML file of these settings (keys in snake case: lease_ttl); "+Precedence+" (env "+EnvPrefix+"CONFIG)")
	for _, s := range nodeSettings {
		if s.scope < min {
			continue
		}
		help := fmt.Sprintf("%s (env %s)", s.help, s.env())
		switch p := s.field(&def).(type) {
		case *string:
			if s.key == "node_id" {
				fs.String(s.flag(), "", help) // the host name is filled in at resolve time
				continue
			}
			fs.String(s.flag(), *p, help)
		case *bool:
			fs.Bool(s.flag(), *p, help)
		case *int:
			fs.Int(s.flag(), *p, help)
		case *config.Duration:
			fs.Duration(s.flag(), p.D(), help)
		case *[]string:
			fs.StringSlice(s.flag(), *p, help)
		}
	}
}

// EnvVar is the environment variable of a flag: SHARDCRON_ plus the flag
// name in upper snake case.
func EnvVar(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ResolveNode builds the node settings from DefaultNode, then the file named
// by --config (or SHARDCRON_CONFIG), then the environment (env, such as
// os.Getenv; nil for none; an empty value counts as unset), then the flags
// set explicitly on fs (bound by BindNodeFlags), and validates the result.
// config.Errors name the file and line, the variable or the setting.
func ResolveNode(fs *pflag.FlagSet, env func(string) string) (Node, error) {
	n, src, err := resolve(fs, env, ServerOnly)
	if err != nil {
		return Node{}, err
	}
	if err := n.Validate(); err != nil {
		return Node{}, src.locate(err)
	}
	return n, nil
}

// ResolveClient is ResolveNode for a client command (flags bound by
// BindClientFlags): the same sources in the same precedence, the same
// --config file (whose server-only keys it checks and ignores), and only the
// Shared settings read from the environment and validated.
func ResolveClient(fs *pflag.FlagSet, env func(string) string) (Client, error) {
	n, src, err := resolve(fs, env, Shared)
	if err != nil {
		return Client{}, err
	}
	c := n.Client()
	if err := c.Validate(); err != nil {
		return Client{}, src.locate(err)
	}
	return c, nil
}

// resolve applies default, file, environment and flags, in that order, for
// the settings whose scope is at least min, and says where each came from.
func resolve(fs *pflag.FlagSet, env func(string) string, min Scope) (Node, sources, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	n := DefaultNode()
	src := sources{}
	path, from := configSource(fs, env)
	var errs config.Errors
	if path != "" {
		lines, err := map[string]int(nil), error(nil)
		if n, lines, err = loadNodeFileKeys(n, path); err != nil {
			if e, ok := err.(*config.Error); ok && e.Line == 0 && e.File == path { // the file itself: name who named it
				e.Msg, e.File = fmt.Sprintf("%s: %s: %s", from, path, e.Msg), ""
			}
			return Node{}, nil, err
		}
		keys := map[string]bool{}
		for k, line := range lines {
			keys[k], src[k] = true, source{file: path, line: line}
		}
		errs = append(errs, settleSecretFiles(&n, keys, path, func(k string) string { return `"` + k + `"` })...)
	}
	set := map[string]bool{}
	for _, s := range nodeSettings {
		v := env(s.env())
		if s.scope < min || v == "" {
			continue
		}
		set[s.key], src[s.key] = true, source{env: s.env()}
		if err := s.parse(&n, v); err != nil {
			errs = append(errs, &config.Error{Msg: fmt.Sprintf("environment %s: %v", s.env(), err)})
		}
	}
	errs = append(errs, settleSecretFiles(&n, set, "environment", func(k string) string { return EnvPrefix + strings.ToUpper(k) })...)
	set = map[string]bool{}
	for _, s := range nodeSettings {
		f := fs.Lookup(s.flag())
		if s.scope < min || f == nil || !f.Changed {
			continue
		}
		set[s.key], src[s.key] = true, source{flag: "--" + s.flag()}
		if err := s.fromFlag(&n, fs); err != nil {
			errs = append(errs, &config.Error{Msg: fmt.Sprintf("flag --%s: %v", s.flag(), err)})
		}
	}
	errs = append(errs, settleSecretFiles(&n, set, "flags", func(k string) string { return "--" + strings.ReplaceAll(k, "_", "-") })...)
	if len(errs) > 0 {
		return Node{}, nil, errs
	}
	if n.EtcdPasswordFile != "" {
		pw, err := readSecretFile(n.EtcdPasswordFile)
		if err != nil {
			return Node{}, nil, src.locate(config.Errors{{Field: "etcd_password_file", Msg: err.Error()}})
		}
		n.EtcdPassword = pw
	}
	return n, src, nil
}

// settleSecretFiles applies one level's secret settings over the lower
// levels': a level that sets a secret or its file clears the other, and
// may not set both (level names the level, name how it spells a key).
func settleSecretFiles(n *Node, set map[string]bool, level string, name func(key string) string) config.Errors {
	var errs config.Errors
	for _, pair := range secretFiles {
		switch {
		case set[pair[0]] && set[pair[1]]:
			errs = append(errs, &config.Error{Msg: fmt.Sprintf("%s: %s and %s: set one or the other", level, name(pair[0]), name(pair[1]))})
		case set[pair[0]]:
			clearSetting(n, pair[1])
		case set[pair[1]]:
			clearSetting(n, pair[0])
		}
	}
	return errs
}

func clearSetting(n *Node, key string) {
	for _, s := range nodeSettings {
		if s.key == key {
			*(s.field(n).(*string)) = ""
		}
	}
}

// MaxSecretFileSize bounds a secret file: a password or a few tokens.
const MaxSecretFileSize = 64 << 10

// readSecretFile returns the first line of the file at path, without its
// line ending. config.Errors name the file and never hold its content.
func readSecretFile(path string) (string, error) {
	b, err := readFileMax(path, MaxSecretFileSize)
	switch {
	case err != nil:
		return "", err
	case len(b) > MaxSecretFileSize:
		return "", fmt.Errorf("%s: more than %d bytes", path, MaxSecretFileSize)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s: the first line is empty", path)
	}
	return line, nil
}

// parse sets the setting from its text form (an environment variable).
func (s setting) parse(n *Node, v string) error {
	switch p := s.field(n).(type) {
	case *string:
		*p = v
	case *bool:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
	case *int:
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = i
	case *config.Duration:
		d, err := config.ParseDuration(v)
		if err != nil {
			return err
		}
		*p = d
	case *[]string:
		*p = splitList(v)
	}
	return nil
}

func (s setting) fromFlag(n *Node, fs *pflag.FlagSet) error {
	var err error
	switch p := s.field(n).(type) {
	case *string:
		*p, err = fs.GetString(s.flag())
	case *bool:
		*p, err = fs.GetBool(s.flag())
	case *int:
		*p, err = fs.GetInt(s.flag())
	case *config.Duration:
		d, e := fs.GetDuration(s.flag())
		if e == nil && d < 0 {
			e = fmt.Errorf("%v is negative", d)
		}
		*p, err = config.Duration(d), e
	case *[]string:
		*p, err = fs.GetStringSlice(s.flag())
	}
	return err
}

// decode sets the setting from a file's value; a list may also be written
// as one comma-separated string, as in the environment.
func (s setting) decode(n *Node, v config.Value) {
	switch p := s.field(n).(type) {
	case *string:
		if x, ok := v.Str(); ok {
			*p = x
		}
	case *bool:
		if x, ok := v.Bool(); ok {
			*p = x
		}
	case *int:
		if x, ok := v.Int(); ok {
			*p = x
		}
	case *config.Duration:
		if x, ok := v.Duration(); ok {
			*p = x
		}
	case *[]string:
		if v.Scalar() {
			if x, ok := v.Str(); ok {
				*p = splitList(x)
			}
		} else if x, ok := v.Strings(); ok {
			*p = x
		}
	}
}

func splitList(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// readFileMax reads at most max+1 bytes of path, enough to tell a file over
// the bound without reading all of it.
func readFileMax(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(max)+1))
}
