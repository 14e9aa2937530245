package receiver

import "context"

// The identity variables every exec run gets (runner.Env*).
const (
	EnvCluster      = "SHARDCRON_CLUSTER"
	EnvJob          = "SHARDCRON_JOB"
	EnvTick         = "SHARDCRON_TICK"
	EnvShard        = "SHARDCRON_SHARD"
	EnvFencingToken = "SHARDCRON_FENCING_TOKEN"
	EnvNode         = "SHARDCRON_NODE"
	EnvRerun        = "SHARDCRON_RERUN"
	// EnvItem and EnvItemName are a sharded job's item: its index and its
	// name; absent for a job without items.
	EnvItem     = "SHARDCRON_ITEM"
	EnvItemName = "SHARDCRON_ITEM_NAME"
)

// ParseEnv reads a run's identity from the environment through getenv
// (os.Getenv), as ParseHeader does from headers.
func ParseEnv(getenv func(string) string) (Delivery, error) {
	return parse(getenv, identityNames{
		EnvCluster, EnvJob, EnvItem, EnvItemName, EnvTick, EnvShard, EnvFencingToken, EnvNode, EnvRerun})
}

// Exec admits the exec run whose identity is in the environment (getenv is
// os.Getenv) into s, which must outlive the process: an SQL store. When
// the ticket's Proceed is true, do the work, then call Done with whether
// it took place; otherwise exit without it: 0 for a Repeat (done already),
// non-zero for Stale or Pending, so shardcron records the run as failed.
func Exec(ctx context.Context, s Store, getenv func(string) string) (Ticket, error) {
	d, err := ParseEnv(getenv)
	if err != nil {
		return Ticket{}, err
	}
	return Admit(ctx, s, d)
}
