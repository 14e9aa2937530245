package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

func argvJob(argv ...string) config.Job {
	return config.Job{Name: "j", Exec: &config.ExecTarget{Command: argv}}
}

// policyHost is a host for policy tests: the server's PATH holds bin (with
// backup, and bk, a symlink to it); allowed is an allowed directory that
// holds tool and escape, a symlink to /bin/sh; planted holds another
// backup.
type policyHost struct{ bin, allowed, planted, path string }

func newPolicyHost(t *testing.T) policyHost {
	t.Helper()
	h := policyHost{bin: t.TempDir(), allowed: t.TempDir(), planted: t.TempDir()}
	h.path = h.bin + ":/usr/bin:/bin"
	for _, f := range []string{filepath.Join(h.bin, "backup"), filepath.Join(h.allowed, "tool"), filepath.Join(h.planted, "backup")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{filepath.Join(h.bin, "bk"): filepath.Join(h.bin, "backup"), filepath.Join(h.allowed, "escape"): "/bin/sh"} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestExecPolicyProgram(t *testing.T) {
	h := newPolicyHost(t)
	allow, err := ExecPolicy{Allow: []string{h.allowed + "/", "backup"}}.resolve(h.path)
	if err != nil {
		t.Fatal(err)
	}
	open, err := ExecPolicy{}.resolve(h.path)
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	tests := []struct {
		policy execPolicy
		job    config.Job
		want   string // the resolved program, or an error's text
	}{
		{open, argvJob("/bin/sh", "-c", "anything"), sh},
		{open, argvJob("backup"), filepath.Join(h.bin, "backup")},
		{execPolicy{disabled: true}, argvJob("/usr/bin/true"), "exec jobs are disabled (--exec=false)"},
		{allow, argvJob("backup"), filepath.Join(h.bin, "backup")},
		{allow, argvJob(filepath.Join(h.bin, "backup")), filepath.Join(h.bin, "backup")},
		{allow, argvJob("bk"), filepath.Join(h.bin, "backup")}, // another name of the same file
		{allow, argvJob(filepath.Join(h.allowed, "tool"), "--fast"), filepath.Join(h.allowed, "tool")},
		{allow, config.Job{Name: "j", Exec: &config.ExecTarget{Command: []string{"./tool"}, Dir: h.allowed}}, filepath.Join(h.allowed, "tool")},
		{allow, argvJob(filepath.Join(h.planted, "backup")), "is not in --exec-allow"},
		{allow, argvJob(filepath.Join(h.allowed, "escape"), "-c", "id"), "is not in --exec-allow"},
		{allow, argvJob(filepath.Join(h.allowed, "..", filepath.Base(h.planted), "backup")), "is not in --exec-allow"},
		{allow, argvJob("/bin/sh", "-c", "backup"), `"/bin/sh (` + sh + `)" is not in --exec-allow`},
		{allow, argvJob("no-such-program"), `"no-such-program" is not in --exec-allow`},
	}
	for _, tc := range tests {
		got, err := tc.policy.program(tc.job, h.path)
		switch {
		case err != nil && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%v: %v, want %q", tc.job.Exec, err, tc.want)
		case err != nil && tc.want != sh && !errors.Is(err, ErrExecRefused):
			t.Errorf("%v: %v is not ErrExecRefused", tc.job.Exec, err)
		case err == nil && got != tc.want:
			t.Errorf("%v: runs %q, want %q", tc.job.Exec, got, tc.want)
		}
	}
}

func TestExecPolicyEnv(t *testing.T) {
	h := newPolicyHost(t)
	open, _ := ExecPolicy{}.resolve(h.path)
	allow, _ := ExecPolicy{Allow: []string{"backup"}}.resolve(h.path)
	listed, _ := ExecPolicy{Allow: []string{"backup"}, EnvAllow: []string{"MODE", "LC_*"}}.resolve(h.path)
	tests := []struct {
		policy execPolicy
		env    map[string]string
		want   string // "" for allowed
	}{
		{open, map[string]string{"LD_PRELOAD": "/x.so", "MODE": "fast"}, ""},
		{open, map[string]string{"PATH": "/tmp/x"}, "a job does not set PATH"},
		{allow, map[string]string{"PATH": "/tmp/x"}, "a job does not set PATH"},
		{allow, map[string]string{"MODE": "fast"}, ""},
		{allow, map[string]string{"LD_PRELOAD": "/x.so"}, "env LD_PRELOAD: makes a loader"},
		{allow, map[string]string{"BASH_ENV": "/x"}, "env BASH_ENV"},
		{allow, map[string]string{"PYTHONSTARTUP": "/x"}, "env PYTHONSTARTUP"},
		{allow, map[string]string{"GIT_SSH_COMMAND": "x"}, "env GIT_SSH_COMMAND"},
		{allow, map[string]string{"BASH_FUNC_ls%%": "() { id; }"}, "not a variable name"},
		{listed, map[string]string{"MODE": "fast", "LC_ALL": "C"}, ""},
		{listed, map[string]string{"OTHER": "x"}, "env OTHER: not in --exec-env-allow"},
	}
	for _, tc := range tests {
		err := tc.policy.checkEnv(tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.env, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrExecRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %q", tc.env, err, tc.want)
		}
	}
}

// New resolves the allow-list at start: an entry that names no program or
// directory is an error there, not a refusal of every run later.
func TestNewResolvesExecAllow(t *testing.T) {
	h := newPolicyHost(t)
	env := func(k string) (string, bool) { return map[string]string{"PATH": h.path}[k], k == "PATH" }
	for _, tc := range []struct {
		policy ExecPolicy
		want   string
	}{
		{ExecPolicy{Allow: []string{"no-such-program"}}, `--exec-allow "no-such-program"`},
		{ExecPolicy{Allow: []string{"/no/such/dir/"}}, `--exec-allow "/no/such/dir/"`},
		{ExecPolicy{Allow: []string{"rel/dir/"}}, "must be an absolute path"},
		{ExecPolicy{EnvAllow: []string{"PATH"}}, `--exec-env-allow "PATH"`},
		{ExecPolicy{Allow: []string{"backup", h.allowed + "/"}}, ""},
	} {
		rn, err := New(Config{Env: env, Exec: tc.policy})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.policy, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want %q", tc.policy, err, tc.want)
		}
		if rn != nil {
			rn.Close()
		}
	}
}

// A refused job fails before its supervisor starts, in every way an etcd
// writer could word it.
func TestExecRefusedBeforeStarting(t *testing.T) {
	h := newPolicyHost(t)
	rn := newRunner(t, func(c *Config) {
		c.Env = func(k string) (string, bool) { return map[string]string{"PATH": h.path}[k], k == "PATH" }
		c.Exec = ExecPolicy{Allow: []string{"backup"}}
	})
	rn.started = func(int, int) { t.Error("a refused job started") }
	job := argvJob("backup")
	job.Env = map[string]string{"PATH": h.planted}
	for _, j := range []config.Job{argvJob("/bin/rm", "-rf", "/"), job} {
		res := rn.Run(context.Background(), testRun(j, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, ErrExecRefused.Error()) {
			t.Errorf("%v: %+v", j.Exec.Command, res)
		}
	}
}
