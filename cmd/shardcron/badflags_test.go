package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config/settings"
)

// badValues are invalid values of flags whose type accepts them: each must
// be refused before anything is done, with an error naming the flag. Keyed
// by flag name; the same flag means the same thing on every command. A
// flag whose type can carry a malformed value (int, duration, bool) is also
// tried with one (typeBad), so a new flag of those types is covered without
// an entry; a new string flag needs one here, or the test says so.
var badValues = map[string][]string{
	"advertise-addr":           {"[::]:8080", "no-port"},
	"cluster":                  {"Bad Name"},
	"config":                   {"/nonexistent/node.yaml"},
	"data-dir":                 {"@file"}, // a regular file; server needs --embedded-etcd for it (see extra)
	"drain-timeout":            {"0s"},
	"egress-allow":             {"10.0.0.0/33", "not-a-net"},
	"egress-deny":              {"10.0.0.0/33", "not-a-net"},
	"embedded-etcd":            {"true"}, // with --etcd-endpoints: they exclude each other
	"etcd-cacert":              {"/nonexistent/ca.pem"},
	"etcd-cert":                {"/nonexistent/cert.pem"},
	"etcd-endpoints":           {"not an endpoint", "ftp://etcd:2379"},
	"etcd-key":                 {"/nonexistent/key.pem"},
	"etcd-password":            {"pw-without-user"},
	"etcd-password-file":       {"/nonexistent/pw"},
	"from":                     {"tomorrow"},
	"next":                     {"-1", "101"},
	"etcd-username":            {"user-without-pw"},
	"exec-allow":               {"relative/dir/"},
	"exec-env-allow":           {"PATH", "BAD-NAME"},
	"file":                     {"/nonexistent/jobs.yaml"},
	"http-addr":                {"nohost", "127.0.0.1:99999"},
	"http-open":                {"sometimes"},
	"http-operate-tokens-file": {"/nonexistent/operate"},
	"http-read-tokens-file":    {"/nonexistent/read"},
	"http-tls-cert":            {"/nonexistent/http.pem"},
	"http-tls-key":             {"/nonexistent/http-key.pem"},
	"item":                     {"Bad Item", ""},
	"jobs":                     {"/nonexistent/jobs.yaml"},
	"job-set-format":           {"4", "auto2"},
	"lease-margin":             {"6s"},
	"lease-ttl":                {"1s", "2500ms"},
	"limit":                    {"-1"},
	"log-format":               {"xml"},
	"log-level":                {"loud"},
	"max-concurrent-runs":      {"0"},
	"node-id":                  {"bad id!"},
	"output":                   {"@output"}, // per command: see outputs
	"replicas":                 {"0", "65"},
	"shards":                   {"0", "65537"},
	"timeout":                  {"0s"},
	"trace-ui-url":             {"https://jaeger.example/trace/", "javascript:alert({trace_id})"},
}

// outputs are the bad --output values of the commands that take one.
var outputs = map[string]string{
	"status": "xml",
	"export": "/nonexistent/dir/jobs.yaml",
}

// perCommand are the bad values of a flag that means something else on
// one command: plan's --replicas is a count of members after the change
// (any N ≥ 1), and a node to --add or --remove is refused beside the
// base's --replicas.
var perCommand = map[string]map[string][]string{
	"plan": {"replicas": {"0", "-1"}, "add": {"n9"}, "remove": {"n1"}},
	// status --shards lists the shards (a bool); server's --shards is S.
	"status": {"shards": {}, "state": {"lost"}},
}

// noBadValue lists flags every value of which is valid (--by is free text:
// who asks; status --owner may name any node, a node that is not there
// owns no shard).
var noBadValue = map[string]bool{"help": true, "by": true, "owner": true}

func typeBad(f *pflag.Flag) []string {
	switch f.Value.Type() {
	case "int":
		return []string{"x"}
	case "duration":
		return []string{"x"}
	case "bool":
		return []string{"maybe"}
	}
	return nil
}

// baseArgs are valid arguments for each command, bad only where the flag
// under test says: an unreachable etcd, so that nothing valid waits long.
func baseArgs(cmd, jobs string) []string {
	etcd := []string{"--etcd-endpoints", "http://127.0.0.1:1", "--timeout", "5s"}
	switch cmd {
	case "server":
		return []string{"--cluster", "t", "--node-id", "n1", "--etcd-endpoints", "http://127.0.0.1:1", "--http-addr", "127.0.0.1:0"}
	case "dev":
		return []string{"--http-addr", "127.0.0.1:0"}
	case "version":
		return nil
	case "plan":
		return append(etcd, "--replicas", "2")
	case "apply", "validate":
		return append([]string{"-f", jobs}, etcd...)[:map[string]int{"apply": 6, "validate": 2}[cmd]]
	case "history", "trigger", "suspend", "resume", "drain", "undrain":
		return append([]string{"x"}, etcd...) // the one argument: a job or node
	}
	return etcd
}

// extra adjusts the base for values that need company.
func extra(cmd, flag string, args []string) []string {
	if cmd == "server" && flag == "data-dir" {
		args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--etcd-endpoints" || a == "http://127.0.0.1:1" })
		return append(args, "--embedded-etcd")
	}
	return args
}

// runBad runs the binary with args and env and returns its exit code and
// standard error; a command still running after 30 s accepted the value.
func runBad(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return runBadBin(t, binPath, env, args...)
}

// runBadBin is runBad with the binary to run: the bad-value tests below
// run the plain build (see plainBinary), being hundreds of processes that
// refuse their input before they start anything.
func runBadBin(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Errorf("%v: still running after 30s: the bad value was accepted", args)
		return -1, stderr.String()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	}
	return 0, stderr.String()
}

func commands() []*cobra.Command {
	var out []*cobra.Command
	for _, c := range newRootCmd().Commands() {
		if !c.Hidden && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c)
		}
	}
	return out
}

// TestEveryBadFlagIsAUsageErrorNamingIt: every flag of every command, given
// an invalid value, exits 2 before doing anything, with a message naming
// the flag.
func TestEveryBadFlagIsAUsageErrorNamingIt(t *testing.T) {
	bin := plainBinary(t)
	dir := t.TempDir()
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    exec: {command: [\"true\"]}\n")
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tried := 0
	defer func() { t.Logf("%d bad flag values tried over %d commands", tried, len(commands())) }()
	var tries []func()
	for _, c := range commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if noBadValue[f.Name] {
				return
			}
			values := append(typeBad(f), badValues[f.Name]...)
			if vs, ok := perCommand[c.Name()][f.Name]; ok {
				values = append(typeBad(f), vs...)
			}
			if len(values) == 0 {
				t.Errorf("%s --%s: no invalid value known; add one to badValues (or noBadValue if every value is valid)", c.Name(), f.Name)
				return
			}
			for _, v := range values {
				switch v {
				case "@file":
					v = file
				case "@output":
					v = outputs[c.Name()]
				}
				args := append([]string{c.Name()}, extra(c.Name(), f.Name, baseArgs(c.Name(), jobs))...)
				args = append(args, "--"+f.Name+"="+v)
				tried++
				tries = append(tries, func() {
					code, stderr := runBadBin(t, bin, nil, args...)
					if code != 2 || !strings.Contains(stderr, "--"+f.Name) {
						t.Errorf("shardcron %s: exit %d, want 2 with an error naming --%s:\n%s", strings.Join(args, " "), code, f.Name, stderr)
					}
				})
			}
		})
	}
	inParallel(tries)
}

// inParallel calls every fn, a few at a time: each starts a process that
// refuses its input at once, before touching etcd or a port, so they need
// not wait for one another (and need no race build: see plainBinary).
func inParallel(fns []func()) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for _, fn := range fns {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			fn()
		})
	}
	wg.Wait()
}

// TestEveryBadSettingNamesItsSource: every server setting with an invalid
// value in its environment variable names the variable, and in the
// --config file names the file, line and field.
func TestEveryBadSettingNamesItsSource(t *testing.T) {
	bin := plainBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tried := 0
	defer func() { t.Logf("%d bad values tried, each as a variable and in a file", tried) }()
	var tries []func()
	server := newServerCmd()
	server.Flags().VisitAll(func(f *pflag.Flag) {
		if noBadValue[f.Name] || f.Name == settings.ConfigFlag {
			return
		}
		key := strings.ReplaceAll(f.Name, "-", "_")
		for i, v := range append(typeBad(f), badValues[f.Name]...) {
			if v == "@file" {
				v = file
			}
			// Without the base's flag of the same setting: a flag wins.
			base := slices.Clone(extra("server", f.Name, baseArgs("server", "")))
			if i := slices.Index(base, "--"+f.Name); i >= 0 {
				base = slices.Delete(base, i, i+2)
			}
			env := settings.EnvVar(f.Name)
			tried++
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", key, i))
			if err := os.WriteFile(path, fmt.Appendf(nil, "cluster: t\n%s: %s\n", key, yamlScalar(v)), 0o644); err != nil {
				t.Fatal(err)
			}
			tries = append(tries, func() {
				code, stderr := runBadBin(t, bin, []string{env + "=" + v}, append([]string{"server"}, base...)...)
				if code != 2 || !strings.Contains(stderr, env) {
					t.Errorf("%s=%s: exit %d, want 2 with an error naming %s:\n%s", env, v, code, env, stderr)
				}
				want := fmt.Sprintf("%s:2: field %q", path, key)
				code, stderr = runBadBin(t, bin, nil, append([]string{"server", "--config", path}, base...)...)
				if code != 2 || !strings.Contains(stderr, want) {
					t.Errorf("%s: %s: %s: exit %d, want 2 with an error naming %s:\n%s", path, key, v, code, want, stderr)
				}
			})
		}
	})
	inParallel(tries)
}

// yamlScalar writes v as a YAML value of the key: lists as lists.
func yamlScalar(v string) string {
	if strings.ContainsAny(v, ":!@") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
