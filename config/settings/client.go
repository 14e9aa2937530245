package settings

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// Client is what every command that talks to a cluster needs, `server`
// included: which cluster, and how to reach its etcd. It is the Shared part
// of the settings table; ResolveClient resolves it for the client commands
// and Node.Client projects it out of a server's settings, so both read one
// table with one precedence.
type Client struct {
	// Cluster names the cluster: every key lives under /shardcron/<cluster>/.
	Cluster string
	// Etcd is the connection.
	Etcd Etcd
}

// Etcd is how to reach etcd: endpoints, TLS and auth.
type Etcd struct {
	// Endpoints are the etcd client URLs (host:port or http(s)://host:port).
	Endpoints []string
	// CACert verifies etcd's certificate ("" trusts the system's roots when
	// an endpoint is https). Cert and Key are a client certificate and its
	// key, both or neither.
	CACert, Cert, Key string
	// Username and Password authenticate to etcd, both or neither.
	Username, Password string
	// CleartextPassword allows sending the password without TLS to an
	// endpoint beyond loopback, which Validate refuses otherwise.
	CleartextPassword bool
}

// Client returns the Shared settings of n.
func (n Node) Client() Client {
	return Client{Cluster: n.Cluster, Etcd: Etcd{
		Endpoints: n.EtcdEndpoints,
		CACert:    n.EtcdCACert, Cert: n.EtcdCert, Key: n.EtcdKey,
		Username: n.EtcdUsername, Password: n.EtcdPassword,
		CleartextPassword: n.EtcdCleartextPassword,
	}}
}

// Validate checks the cluster name and the connection, naming each bad
// setting by its file key; etcd endpoints are required.
func (c Client) Validate() error {
	var errs config.Errors
	c.check(func(key, format string, args ...any) {
		errs = append(errs, &config.Error{Field: key, Msg: fmt.Sprintf(format, args...)})
	})
	if len(c.Etcd.Endpoints) == 0 {
		errs = append(errs, &config.Error{Field: "etcd_endpoints", Msg: "no etcd: set --etcd-endpoints (SHARDCRON_ETCD_ENDPOINTS, etcd_endpoints)"})
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// check reports what is wrong with c through bad, except missing endpoints,
// which server may replace with an embedded etcd.
func (c Client) check(bad func(key, format string, args ...any)) {
	if err := keyspace.ValidCluster(c.Cluster); err != nil {
		bad("cluster", "%v", err)
	}
	for _, ep := range c.Etcd.Endpoints {
		if msg := checkEndpoint(ep); msg != "" {
			bad("etcd_endpoints", "%q: %s", ep, msg)
		}
	}
	pair(bad, "etcd_cert", c.Etcd.Cert, "etcd_key", c.Etcd.Key)
	pair(bad, "etcd_username", c.Etcd.Username, "etcd_password", c.Etcd.Password)
	c.Etcd.checkTransport(bad)
}

// checkTransport refuses TLS files with an endpoint the etcd client dials
// in clear (it drops the credentials for http:// and unix:// without a
// word, so the files would protect nothing), and a password that would
// cross the network in clear unless CleartextPassword says so.
func (e Etcd) checkTransport(bad func(key, format string, args ...any)) {
	tlsKey := ""
	for _, kv := range [][2]string{{"etcd_cacert", e.CACert}, {"etcd_cert", e.Cert}, {"etcd_key", e.Key}} {
		if kv[1] != "" {
			tlsKey = kv[0]
			break
		}
	}
	for _, ep := range e.Endpoints {
		scheme, host, ok := strings.Cut(ep, "://")
		if !ok {
			scheme, host = "", ep
		}
		plain := scheme == "http" || scheme == "unix"
		if tlsKey != "" && plain {
			bad(tlsKey, "%s is set but the etcd endpoint %q is %s://, which the etcd client dials without TLS, ignoring every TLS file: write the endpoint as https://", tlsKey, ep, scheme)
			return
		}
		clear := scheme == "http" || scheme == "" && tlsKey == ""
		if e.Password != "" && clear && !e.CleartextPassword && !IsLoopback(host) {
			bad("etcd_endpoints", "%q: the etcd password would cross the network in clear: use https:// (with --etcd-cacert), or accept it with --etcd-cleartext-password (SHARDCRON_ETCD_CLEARTEXT_PASSWORD=true)", ep)
			return
		}
	}
}

// pair reports settings a and b (values av, bv) set one without the other,
// against the one that is set: that is where the user wrote something.
func pair(bad func(key, format string, args ...any), a, av, b, bv string) {
	if (av == "") == (bv == "") {
		return
	}
	key := a
	if av == "" {
		key = b
	}
	bad(key, "%s and %s go together: set both or neither", a, b)
}

// checkEndpoint accepts what the etcd client does: host:port, or a URL with
// scheme http, https, unix or unixs.
func checkEndpoint(ep string) string {
	if ep == "" || strings.ContainsAny(ep, " \t\r\n") {
		return "an endpoint is host:port or a URL such as https://etcd-0:2379"
	}
	if scheme, rest, ok := strings.Cut(ep, "://"); ok {
		if !slices.Contains([]string{"http", "https", "unix", "unixs"}, scheme) {
			return "the scheme must be http, https, unix or unixs"
		}
		if rest == "" {
			return "no host"
		}
		return ""
	}
	if _, _, err := net.SplitHostPort(ep); err != nil {
		return "an endpoint is host:port or a URL such as https://etcd-0:2379"
	}
	return ""
}
