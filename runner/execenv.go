package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The identity variables every exec job gets.
const (
	EnvCluster      = "SHARDCRON_CLUSTER"
	EnvJob          = "SHARDCRON_JOB"
	EnvTick         = "SHARDCRON_TICK"
	EnvShard        = "SHARDCRON_SHARD"
	EnvFencingToken = "SHARDCRON_FENCING_TOKEN"
	EnvNode         = "SHARDCRON_NODE"
	EnvRerun        = "SHARDCRON_RERUN"      // "true" on a re-run; absent otherwise
	EnvTrigger      = "SHARDCRON_TRIGGER"    // "manual" on a manual tick; absent otherwise
	EnvTriggerID    = "SHARDCRON_TRIGGER_ID" // the manual tick's request id
	EnvAttempt      = "SHARDCRON_ATTEMPT"    // the attempt on a retry (2, 3, ...); absent on the first
	// EnvItem, EnvItems and EnvItemName are a sharded job's item (as
	// HeaderItem, HeaderItems, HeaderItemName); absent for a job without
	// items.
	EnvItem     = config.VarItem
	EnvItems    = config.VarItems
	EnvItemName = config.VarItemName
	// EnvTraceparent and EnvTracestate carry the attempt's W3C Trace
	// Context when the run is traced, under the names OpenTelemetry's
	// environment-variable propagation reads; the job's own are then
	// replaced.
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
)

// defaultPath is the PATH an exec job gets when the server has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// valueOr returns lookup's value of k (the server's PATH or HOME), or def
// when it is unset or empty.
func valueOr(lookup func(string) (string, bool), k, def string) string {
	if v, ok := lookup(k); ok && v != "" {
		return v
	}
	return def
}

// execEnv is the job's whole environment: PATH and HOME from the server,
// the job's env (expanded; never PATH, see ExecPolicy), and the identity,
// which nothing overrides.
func (rn *Runner) execEnv(r scheduler.Run) ([]string, error) {
	env := map[string]string{"PATH": valueOr(rn.cfg.Env, "PATH", defaultPath), "HOME": valueOr(rn.cfg.Env, "HOME", "/")}
	if err := rn.exec.checkEnv(r.Job.Env); err != nil {
		return nil, err
	}
	for k, v := range r.Job.Env {
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("env %q: not a valid variable", k)
		}
		x, err := rn.expand(v, r.Item)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		env[k] = x
	}
	for _, k := range []string{EnvRerun, EnvTrigger, EnvTriggerID, EnvAttempt, EnvItem, EnvItems, EnvItemName} {
		delete(env, k)
	}
	env[EnvCluster] = r.Cluster
	env[EnvJob] = r.Job.Name
	env[EnvTick] = FormatTick(r.Tick)
	env[EnvShard] = strconv.Itoa(r.Shard)
	env[EnvFencingToken] = strconv.FormatInt(r.Token, 10)
	env[EnvNode] = r.Node
	if !r.Item.IsZero() {
		env[EnvItem] = strconv.Itoa(r.Item.Index)
		env[EnvItems] = strconv.Itoa(r.Item.Count)
		env[EnvItemName] = r.Item.Name
	}
	if r.Rerun {
		env[EnvRerun] = "true"
	}
	if r.Trigger != "" {
		env[EnvTrigger], env[EnvTriggerID] = "manual", r.Trigger
	}
	if r.Attempt > 1 {
		env[EnvAttempt] = strconv.Itoa(r.Attempt)
	}
	if r.Trace.Parent != "" {
		delete(env, EnvTracestate)
		env[EnvTraceparent] = r.Trace.Parent
		if r.Trace.State != "" {
			env[EnvTracestate] = r.Trace.State
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// execArgv is the command's argv with the item variables in its arguments
// expanded (config.ExpandItem) and nothing else: any other "$" is the
// program's own. command[0] stays as it is, the program the policy resolved.
func execArgv(command []string, it config.Item) []string {
	if it.IsZero() {
		return command
	}
	argv := make([]string, len(command))
	argv[0] = command[0]
	for i, a := range command[1:] {
		argv[i+1] = config.ExpandItem(a, it)
	}
	return argv
}
