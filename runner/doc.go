// Package runner runs one tick of one job: an HTTP request, a process, or a
// function registered in-process. It implements scheduler.Runner.
//
// # What a run carries
//
// Every run carries its identity: the idempotency key (cluster, job, item,
// tick; the item of a sharded job, none otherwise) and the fencing token of
// the shard lease under which it was claimed, plus the shard and the node.
// HTTP jobs send them as the headers
// Shardcron-Cluster, Shardcron-Job, Shardcron-Tick (RFC 3339, UTC),
// Shardcron-Shard, Shardcron-Fencing-Token and Shardcron-Node (and
// Shardcron-Rerun: true when the tick is run again after an interrupted
// run; Shardcron-Trigger: manual and Shardcron-Trigger-Id on a manual tick;
// Shardcron-Attempt on a retry; Shardcron-Item, Shardcron-Items and
// Shardcron-Item-Name on a run of an item of a sharded job: its index, the
// job's number of items, its name). Exec jobs get the same as the
// environment variables SHARDCRON_CLUSTER, SHARDCRON_JOB, SHARDCRON_TICK,
// SHARDCRON_SHARD, SHARDCRON_FENCING_TOKEN, SHARDCRON_NODE (and
// SHARDCRON_RERUN=true, SHARDCRON_TRIGGER=manual, SHARDCRON_TRIGGER_ID,
// SHARDCRON_ATTEMPT, SHARDCRON_ITEM, SHARDCRON_ITEMS, SHARDCRON_ITEM_NAME).
// A traced run (scheduler.Run.Trace) also sends the W3C headers
// traceparent and tracestate, and an exec job gets them as TRACEPARENT and
// TRACESTATE, so the target's own spans join the run's trace.
// In-process handlers read it with IdentityFrom. A job cannot override the
// identity: its own headers and env of the same names are replaced.
//
// # Invariants
//
//   - Nothing external happens once the safe deadline has passed: the
//     runner reads r.Deadline.Remaining() synchronously right before sending
//     a request, and compares CLOCK_BOOTTIME with the deadline's instant
//     right before starting a process; it does not rely on a timer having
//     fired (after a pause any goroutine may run first).
//   - ${NAME} in a job's URL, headers, body and exec env expands only names
//     starting with SHARDCRON_JOB_ and, in an item's run, the item variables
//     (config.VarItem, VarItems, VarItemName) from the run's item; anything
//     else, or an unset name, fails the run before anything is sent or
//     started. An exec command's arguments expand the item variables and
//     nothing else (config.ExpandItem). The server's environment
//     is never inherited by a job: an exec job sees only the identity
//     variables, PATH, HOME and its own env.
//   - The replica's own policy holds whatever the job set says (a job
//     written to etcd without validation included). An exec job runs only
//     the file its command[0] resolves to with the server's PATH, symlinks
//     evaluated, and only if Config.Exec allows it; its env never sets PATH
//     (see ExecPolicy). An http job connects only to addresses
//     Config.Egress allows, checked on the resolved address of every
//     connection, redirects included (see EgressPolicy); it follows
//     redirects as the job's follow_redirects says, never from https to
//     http, never with Referer, and never with the job's headers and body
//     to another host.
//   - No value a run's ${SHARDCRON_JOB_*} references expanded to appears in
//     its Result.Detail, as is or escaped (an item's values are no secrets
//     and stay); Result.Output is the target's
//     and is empty when the job says keep_output: false.
//   - A run's work ends with the call: Run returns only when the request is
//     finished or abandoned, the process group is dead, or the function
//     returned.
//   - An exec job cannot outlive the lease, even if this process is paused
//     or killed. It runs in its own process group under a supervisor (this
//     binary, in a hidden subcommand; see SuperviseMain) that kills the group
//     with SIGKILL when the allowance the replica keeps extending over a pipe
//     runs out on the supervisor's own CLOCK_BOOTTIME, or when the pipe
//     closes because the replica died. The allowance is exactly the
//     session's safe deadline, an instant (scheduler.Deadline), never a
//     time left added to a second clock read, which a stall in between
//     would stretch.
//
// # Failure model
//
// When the run's context is cancelled with cause scheduler.ErrShardLost or
// scheduler.ErrDeadline, work stops at once: the HTTP request is abandoned,
// the process group gets SIGKILL. Any other cancellation (the job's timeout,
// replace, a graceful release) is orderly: SIGTERM, then SIGKILL after
// Config.KillGrace. A paused replica (SIGSTOP, GC, a stalled VM) stops
// extending; its supervisor kills the group when the last allowance, never
// later than the safe deadline, runs out. A SIGKILLed replica closes the
// pipe; its supervisor kills the group at once.
//
// What is not guaranteed: an HTTP request already on the wire can still
// take effect after the deadline (the receiver must compare the fencing
// token); an in-process handler that ignores its context keeps running
// (Run returns only when it does); a process that leaves its process group
// (setsid) is still found and killed by the supervisor, which is a child
// subreaper, but only once its parent has died.
package runner
