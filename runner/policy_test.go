package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

func argvJob(argv ...string) config.Job {
	return config.Job{Name: "j", Exec: &config.ExecTarget{Command: argv}}
}

func TestExecPolicyCheck(t *testing.T) {
	allow := ExecPolicy{Allow: []string{"/usr/local/bin/", "/usr/bin/true", "backup"}}
	tests := []struct {
		policy ExecPolicy
		job    config.Job
		want   string // "" for allowed
	}{
		{ExecPolicy{}, argvJob("/bin/sh", "-c", "anything"), ""},
		{ExecPolicy{Disabled: true}, argvJob("/usr/bin/true"), "exec jobs are disabled (--exec=false)"},
		{ExecPolicy{Disabled: true}, config.Job{Name: "h", HTTP: &config.HTTPTarget{URL: "http://x/"}}, ""},
		{allow, argvJob("/usr/bin/true"), ""},
		{allow, argvJob("/usr/local/bin/sweep", "--fast"), ""},
		{allow, argvJob("/usr/local/bin/sub/dir/tool"), ""},
		{allow, argvJob("backup"), ""},
		{allow, argvJob("/usr/bin/false"), `"/usr/bin/false" is not in --exec-allow`},
		{allow, argvJob("/bin/sh", "-c", "/usr/bin/true"), `"/bin/sh" is not in --exec-allow`},
		{allow, argvJob("/usr/local/bin/../../../bin/sh"), `is not in --exec-allow`},
		{allow, argvJob("/usr/local/binx/tool"), `is not in --exec-allow`},
		{allow, argvJob("true"), `"true" is not in --exec-allow`},
		{allow, argvJob("sub/backup"), `is not in --exec-allow`},
	}
	for _, tc := range tests {
		err := tc.policy.Check(tc.job)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v %v: refused: %v", tc.policy, tc.job.Exec, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrExecRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v %v: got %v, want %q", tc.policy, tc.job.Exec, err, tc.want)
		}
	}
}

// failRunner fails the test when it is called: a refused run must not
// reach the real runner.
type failRunner struct{ t *testing.T }

func (f failRunner) KillGrace() time.Duration { return 7 * time.Second }

func (f failRunner) Run(context.Context, scheduler.Run) scheduler.Result {
	f.t.Error("the inner runner was called for a refused job")
	return scheduler.Result{}
}

func TestWithExecPolicyRefusesBeforeRunning(t *testing.T) {
	r := WithExecPolicy(failRunner{t}, ExecPolicy{Allow: []string{"/usr/bin/true"}})
	res := r.Run(context.Background(), scheduler.Run{Job: argvJob("/bin/rm", "-rf", "/")})
	if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, `"/bin/rm" is not in --exec-allow`) {
		t.Errorf("result %+v", res)
	}
	if g := r.KillGrace(); g != 7*time.Second {
		t.Errorf("KillGrace through the policy = %v, want the inner runner's 7s", g)
	}
	inner := failRunner{t}
	if got := WithExecPolicy(inner, ExecPolicy{}); got != scheduler.Runner(inner) {
		t.Error("an empty policy wraps the runner")
	}
}
