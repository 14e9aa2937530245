package settings

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
)

// TestResolveClientPrecedence: client commands read the same table with the
// same precedence as server (flag > environment > --config file > default),
// an empty variable counts as unset, and a server's --config file is
// accepted whole while its server-only settings are ignored, as are
// server-only variables.
func TestResolveClientPrecedence(t *testing.T) {
	file := writeFile(t, "cluster: from-file\netcd_endpoints: [https://file:2379]\netcd_username: file-user\netcd_password: file-pw\nlease_ttl: 20s\nshards: 256\n")
	tests := []struct {
		name  string
		flags []string
		env   map[string]string
		want  Client
	}{
		{"default cluster, endpoints from flag", []string{"--etcd-endpoints", "http://flag:2379"}, nil,
			Client{Cluster: DefaultCluster, Etcd: Etcd{Endpoints: []string{"http://flag:2379"}}}},
		{"file over default", []string{"--config", file}, nil,
			Client{Cluster: "from-file", Etcd: Etcd{Endpoints: []string{"https://file:2379"}, Username: "file-user", Password: "file-pw"}}},
		{"env over file", []string{"--config", file}, map[string]string{"SHARDCRON_CLUSTER": "from-env", "SHARDCRON_ETCD_ENDPOINTS": "https://e1:2379, https://e2:2379"},
			Client{Cluster: "from-env", Etcd: Etcd{Endpoints: []string{"https://e1:2379", "https://e2:2379"}, Username: "file-user", Password: "file-pw"}}},
		{"flag over env", []string{"--config", file, "--cluster", "from-flag"}, map[string]string{"SHARDCRON_CLUSTER": "from-env"},
			Client{Cluster: "from-flag", Etcd: Etcd{Endpoints: []string{"https://file:2379"}, Username: "file-user", Password: "file-pw"}}},
		{"empty variable is unset", []string{"--config", file}, map[string]string{"SHARDCRON_CLUSTER": "", "SHARDCRON_ETCD_ENDPOINTS": "", "SHARDCRON_ETCD_PASSWORD": ""},
			Client{Cluster: "from-file", Etcd: Etcd{Endpoints: []string{"https://file:2379"}, Username: "file-user", Password: "file-pw"}}},
		{"config from env; server-only variables ignored", nil, map[string]string{"SHARDCRON_CONFIG": file, "SHARDCRON_LEASE_TTL": "not a duration", "SHARDCRON_SHARDS": "x"},
			Client{Cluster: "from-file", Etcd: Etcd{Endpoints: []string{"https://file:2379"}, Username: "file-user", Password: "file-pw"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
			BindClientFlags(fs)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			got, err := ResolveClient(fs, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestServerAndClientAgree: for the Shared settings, server and a client
// command given the same flags, environment and file resolve the same thing.
func TestServerAndClientAgree(t *testing.T) {
	file := writeFile(t, "cluster: from-file\netcd_endpoints: https://file:2379\netcd_cacert: /ca.pem\n")
	env := map[string]string{"SHARDCRON_CONFIG": file, "SHARDCRON_ETCD_USERNAME": "u", "SHARDCRON_ETCD_PASSWORD": "p", "SHARDCRON_CLUSTER": ""}
	flags := []string{"--etcd-cert", "/c.pem", "--etcd-key", "/k.pem"}
	server := pflag.NewFlagSet("server", pflag.ContinueOnError)
	BindNodeFlags(server)
	client := pflag.NewFlagSet("status", pflag.ContinueOnError)
	BindClientFlags(client)
	if err := server.Parse(append(flags, "--http-addr", "127.0.0.1:0")); err != nil {
		t.Fatal(err)
	}
	if err := client.Parse(flags); err != nil {
		t.Fatal(err)
	}
	n, err := ResolveNode(server, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c, err := ResolveClient(client, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.Client(), c) {
		t.Fatalf("server %+v\nclient %+v", n.Client(), c)
	}
}

func TestResolveClientErrors(t *testing.T) {
	tests := []struct {
		flags []string
		env   map[string]string
		want  string
	}{
		{nil, nil, `field "etcd_endpoints": no etcd: set --etcd-endpoints (SHARDCRON_ETCD_ENDPOINTS, etcd_endpoints)`},
		{[]string{"--cluster", "Bad Name", "--etcd-endpoints", "http://x:1"}, nil, `flag --cluster: cluster name "Bad Name"`},
		{[]string{"--etcd-endpoints", "http://x:1", "--etcd-cert", "/c.pem"}, nil, `etcd_cert and etcd_key go together`},
		{[]string{"--etcd-endpoints", "http://x:1"}, map[string]string{"SHARDCRON_ETCD_USERNAME": "u"}, `etcd_username and etcd_password go together`},
	}
	for _, tc := range tests {
		fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
		BindClientFlags(fs)
		if err := fs.Parse(tc.flags); err != nil {
			t.Fatal(err)
		}
		_, err := ResolveClient(fs, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("flags %v env %v:\n got: %v\nwant: %s", tc.flags, tc.env, err, tc.want)
		}
	}
}

// TestClientFlagsAreTheSharedSettings: client commands get exactly the
// Shared settings and --config, never a server-only flag.
func TestClientFlagsAreTheSharedSettings(t *testing.T) {
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	BindClientFlags(fs)
	for _, s := range nodeSettings {
		if got := fs.Lookup(s.flag()) != nil; got != (s.scope == Shared) {
			t.Errorf("--%s bound on a client command: %v, scope %v", s.flag(), got, s.scope)
		}
	}
	if fs.Lookup(ConfigFlag) == nil {
		t.Error("no --config on a client command")
	}
}

// TestEtcdPasswordFile: the password comes from the first line of a file
// named by --etcd-password-file, SHARDCRON_ETCD_PASSWORD_FILE or the
// --config file; a level that names the file overrides a password from a
// lower level and the other way round; one level may not set both; errors
// name the file and never hold the password.
func TestEtcdPasswordFile(t *testing.T) {
	const secret = "s3cret-marker-0412"
	pwFile := writeFile(t, secret+"\r\nignored second line\n")
	settings := writeFile(t, "etcd_endpoints: https://x:1\netcd_username: u\netcd_password: file-level\n")
	settingsWithFile := writeFile(t, "etcd_endpoints: https://x:1\netcd_username: u\netcd_password_file: "+pwFile+"\n")
	both := writeFile(t, "etcd_endpoints: https://x:1\netcd_username: u\netcd_password: a\netcd_password_file: "+pwFile+"\n")
	emptyPw := writeFile(t, "\nsecond\n")
	tests := []struct {
		name    string
		flags   []string
		env     map[string]string
		want    string // password, or
		wantErr string
	}{
		{"flag", []string{"--etcd-endpoints", "https://x:1", "--etcd-username", "u", "--etcd-password-file", pwFile}, nil, secret, ""},
		{"env _FILE", []string{"--etcd-endpoints", "https://x:1"}, map[string]string{"SHARDCRON_ETCD_USERNAME": "u", "SHARDCRON_ETCD_PASSWORD_FILE": pwFile}, secret, ""},
		{"config file", []string{"--config", settingsWithFile}, nil, secret, ""},
		{"env file over config password", []string{"--config", settings}, map[string]string{"SHARDCRON_ETCD_PASSWORD_FILE": pwFile}, secret, ""},
		{"env password over config file", []string{"--config", settingsWithFile}, map[string]string{"SHARDCRON_ETCD_PASSWORD": "from-env"}, "from-env", ""},
		{"flag password over env file", []string{"--config", settings, "--etcd-password", "from-flag"}, map[string]string{"SHARDCRON_ETCD_PASSWORD_FILE": pwFile}, "from-flag", ""},
		{"both in the environment", []string{"--config", settings}, map[string]string{"SHARDCRON_ETCD_PASSWORD": "a", "SHARDCRON_ETCD_PASSWORD_FILE": pwFile}, "", "environment: SHARDCRON_ETCD_PASSWORD and SHARDCRON_ETCD_PASSWORD_FILE: set one or the other"},
		{"both in the file", []string{"--config", both}, nil, "", both + `: "etcd_password" and "etcd_password_file": set one or the other`},
		{"missing file", []string{"--config", settings, "--etcd-password-file", "/nonexistent/pw"}, nil, "", `flag --etcd-password-file: open /nonexistent/pw: no such file or directory`},
		{"empty first line", []string{"--config", settings, "--etcd-password-file", emptyPw}, nil, "", emptyPw + ": the first line is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, bind := range []func(*pflag.FlagSet){BindClientFlags, BindNodeFlags} {
				fs := pflag.NewFlagSet("cmd", pflag.ContinueOnError)
				bind(fs)
				if err := fs.Parse(append(tc.flags, "--cluster", "c")); err != nil {
					t.Fatal(err)
				}
				c, err := ResolveClient(fs, func(k string) string { return tc.env[k] })
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), secret) {
						t.Fatalf("got %v, want an error with %q and without the password", err, tc.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if c.Etcd.Password != tc.want {
					t.Fatalf("password %q, want %q", c.Etcd.Password, tc.want)
				}
			}
		})
	}
}

// TestEtcdTransportRefusals: TLS files with an endpoint the etcd client
// dials in clear (http://, unix://) are refused, naming the TLS setting:
// the client drops the credentials for that scheme without a word. A
// password that would cross the network in clear (no TLS, an endpoint
// beyond loopback) is refused unless etcd_cleartext_password says so.
func TestEtcdTransportRefusals(t *testing.T) {
	tests := []struct {
		name string
		etcd Etcd
		want string // the field named; "" accepts
	}{
		{"TLS files with https", Etcd{Endpoints: []string{"https://etcd:2379"}, CACert: "/ca", Cert: "/c", Key: "/k"}, ""},
		{"TLS files with host:port", Etcd{Endpoints: []string{"etcd:2379"}, CACert: "/ca"}, ""},
		{"CA with http", Etcd{Endpoints: []string{"https://etcd-0:2379", "http://etcd-1:2379"}, CACert: "/ca"}, "etcd_cacert"},
		{"client cert with http on loopback", Etcd{Endpoints: []string{"http://127.0.0.1:2379"}, Cert: "/c", Key: "/k"}, "etcd_cert"},
		{"client cert with unix", Etcd{Endpoints: []string{"unix://etcd.sock"}, Cert: "/c", Key: "/k"}, "etcd_cert"},
		{"password over http beyond loopback", Etcd{Endpoints: []string{"http://etcd:2379"}, Username: "u", Password: "p"}, "etcd_endpoints"},
		{"password to host:port without TLS", Etcd{Endpoints: []string{"10.0.0.5:2379"}, Username: "u", Password: "p"}, "etcd_endpoints"},
		{"password over http, allowed", Etcd{Endpoints: []string{"http://etcd:2379"}, Username: "u", Password: "p", CleartextPassword: true}, ""},
		{"password over http on loopback", Etcd{Endpoints: []string{"http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379"}, Username: "u", Password: "p"}, ""},
		{"password over unix", Etcd{Endpoints: []string{"unix://etcd.sock"}, Username: "u", Password: "p"}, ""},
		{"password over https", Etcd{Endpoints: []string{"https://etcd:2379"}, Username: "u", Password: "p"}, ""},
		{"password to host:port with TLS", Etcd{Endpoints: []string{"etcd:2379"}, CACert: "/ca", Username: "u", Password: "p"}, ""},
	}
	for _, tc := range tests {
		err := Client{Cluster: "c", Etcd: tc.etcd}.Validate()
		var errs config.Errors
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != tc.want):
			t.Errorf("%s: %v, want one error naming %s", tc.name, err, tc.want)
		}
	}
}
