package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// ExecPolicy says which exec jobs a replica runs. The job set is shared by
// every replica and written by whoever may write it in etcd; the policy is
// each replica's own, so a host can refuse to run programs it was not
// deployed for. A refused run fails, with the reason as its detail; nothing
// is started.
type ExecPolicy struct {
	// Disabled refuses every exec job (--exec=false).
	Disabled bool
	// Allow, when not empty, lists the programs exec jobs may start
	// (--exec-allow): an entry matches the job's command[0] exactly, or, if
	// it ends in "/", every absolute command[0] inside that directory
	// (after cleaning, so "/usr/bin/../../bin/sh" is not inside "/usr/bin/").
	// No shell is involved unless a job names one as its command, and then
	// it must be allowed like any other program.
	Allow []string
}

// Check returns nil when the policy lets the job run.
func (p ExecPolicy) Check(j config.Job) error {
	if j.Exec == nil {
		return nil
	}
	if p.Disabled {
		return fmt.Errorf("%w: exec jobs are disabled (--exec=false)", ErrExecRefused)
	}
	if len(p.Allow) == 0 || len(j.Exec.Command) == 0 {
		return nil
	}
	prog := j.Exec.Command[0]
	if slices.Contains(p.Allow, prog) {
		return nil
	}
	if filepath.IsAbs(prog) {
		clean := filepath.Clean(prog)
		for _, a := range p.Allow {
			if strings.HasSuffix(a, "/") && strings.HasPrefix(clean, filepath.Clean(a)+"/") {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %q is not in --exec-allow", ErrExecRefused, prog)
}

// WithExecPolicy returns inner behind the policy: refused runs fail
// without reaching inner. An empty policy returns inner itself.
func WithExecPolicy(inner scheduler.Runner, p ExecPolicy) scheduler.Runner {
	if !p.Disabled && len(p.Allow) == 0 {
		return inner
	}
	return policyRunner{inner, p}
}

type policyRunner struct {
	inner  scheduler.Runner
	policy ExecPolicy
}

func (pr policyRunner) KillGrace() time.Duration { return pr.inner.KillGrace() }

func (pr policyRunner) Run(ctx context.Context, r scheduler.Run) scheduler.Result {
	if err := pr.policy.Check(r.Job); err != nil {
		return scheduler.Result{Status: scheduler.StatusFailed, Detail: err.Error()}
	}
	return pr.inner.Run(ctx, r)
}
