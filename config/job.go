package config

import (
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// Concurrency says what a tick does while the job's previous run is still
// going.
type Concurrency string

const (
	ConcurrencyAllow   Concurrency = "allow"   // run alongside
	ConcurrencyForbid  Concurrency = "forbid"  // skip the tick, recorded as skipped
	ConcurrencyReplace Concurrency = "replace" // cancel the running one, then run
)

// Misfire says what a new owner does with ticks that came due while nobody
// ran them (ticks since a graceful release always run: a handoff is not a
// misfire).
type Misfire string

const (
	MisfireSkip    Misfire = "skip"     // record them as skipped
	MisfireRunOnce Misfire = "run_once" // run the latest one, skip the rest
	MisfireRunAll  Misfire = "run_all"  // run each, within the starting deadline
)

// Redirects says which redirects an http job follows.
type Redirects string

const (
	RedirectsNone     Redirects = "none"      // none: the 3xx response is the run's answer
	RedirectsSameHost Redirects = "same_host" // to the same host and port (and http to https on the default ports)
	RedirectsAny      Redirects = "any"       // to any host the egress rules allow, without the job's headers and body
)

// Job is one entry of the jobs file, with defaults applied once validated
// (SetDefaults; ParseJobs does it). Exactly one of HTTP, Exec and Func is set.
type Job struct {
	// Name identifies the job in the cluster and picks its shard: unique,
	// [a-z0-9][a-z0-9._-]*, at most MaxNameLen (128) bytes.
	Name string `yaml:"name" json:"name"`
	// Schedule is a cron spec: 6 fields (seconds first), 5 fields, or a
	// descriptor (@yearly, @monthly, @weekly, @daily, @hourly, @every 10s).
	// A field may use H, H(a-b), H/n or H(a-b)/n: a stable value hashed
	// from the job's name ("H H * * * *" spreads jobs over the hour). See
	// package cronspec for the DST rules and what is rejected.
	// Required unless At is given.
	Schedule string `yaml:"schedule,omitempty" json:"schedule"`
	// Timezone is the IANA zone the schedule's fields are read in; default
	// UTC.
	Timezone string `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	// At makes a one-shot job, instead of a schedule: it runs once, at this
	// instant (RFC 3339, a whole second), or, if no owner held it then,
	// when an owner comes back (misfire and starting deadline apply). Once
	// its tick is decided it never runs again; an At before the job's first
	// apply never runs.
	At time.Time `yaml:"at,omitempty" json:"at,omitzero"`
	// StartAt (RFC 3339): no tick before it.
	StartAt time.Time `yaml:"start_at,omitempty" json:"start_at,omitzero"`
	// EndAt (RFC 3339): no tick after it. A job whose EndAt has passed is
	// kept, not refused: it is shown as done once its last tick is decided.
	EndAt time.Time `yaml:"end_at,omitempty" json:"end_at,omitzero"`
	// MaxRuns, when given, keeps only the job's first MaxRuns ticks after
	// its first apply (and after StartAt): 1 to MaxMaxRuns (100,000). A
	// tick skipped by policy counts as one of them. Then the job is done.
	MaxRuns int `yaml:"max_runs,omitempty" json:"max_runs,omitempty"`
	// Jitter delays each tick's run by a pseudo-random whole number of
	// seconds in [0, jitter), from the job's name and the tick, the same on
	// every replica; the run's tick (its idempotency key) stays the
	// scheduled one. At least 2s, whole seconds, at most the shortest gap
	// between two ticks of the schedule.
	Jitter Duration `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	// Items makes a sharded job: every tick runs items 0 to Items-1 (1 to
	// MaxItems, 4096), each a unit of its own — its own shard, claim,
	// idempotency key (cluster, job, item, tick), fencing token, retries and
	// history — so the items of one job spread over the replicas. A run
	// carries its item (Shardcron-Item, Shardcron-Items; SHARDCRON_ITEM,
	// SHARDCRON_ITEMS), which the url, header values, body, exec command
	// and env may reference as ${SHARDCRON_ITEM}.
	Items int `yaml:"items,omitempty" json:"items,omitempty"`
	// ItemNames makes a sharded job of named items instead of a count (a
	// tenant each, say): unique names, [a-z0-9][a-z0-9._-]*, at most 63
	// bytes; a run also carries its item's name (Shardcron-Item-Name,
	// SHARDCRON_ITEM_NAME). An item keeps its record and history by name, so
	// the list may be reordered or grown.
	ItemNames []string `yaml:"item_names,omitempty" json:"item_names,omitempty"`
	// HTTP: send a request on every tick.
	HTTP *HTTPTarget `yaml:"http,omitempty" json:"http,omitempty"`
	// Exec: start a process on every tick.
	Exec *ExecTarget `yaml:"exec,omitempty" json:"exec,omitempty"`
	// Func names a function registered in the process (embedding, tests).
	Func string `yaml:"func,omitempty" json:"func,omitempty"`
	// Timeout bounds one run: more than 0, at most MaxTimeout (24h);
	// default DefaultTimeout (1m).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Concurrency: what a tick does while the previous run still goes;
	// default forbid.
	Concurrency Concurrency `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	// Misfire: what a new owner does with ticks nobody ran; default
	// run_once.
	Misfire Misfire `yaml:"misfire,omitempty" json:"misfire,omitempty"`
	// StartingDeadline is how late after its tick a run may still start
	// (waiting for a slot, or caught up by a new owner); past it the tick is
	// recorded as skipped. 0, the default, means no deadline: a late tick
	// runs however late. At most MaxStartingDeadline (720h).
	StartingDeadline Duration `yaml:"starting_deadline,omitempty" json:"starting_deadline,omitempty"`
	// Suspend keeps the job (and its since) but fires nothing.
	Suspend bool `yaml:"suspend,omitempty" json:"suspend,omitempty"`
	// Retries re-runs a failed run (HTTP status not expected, exec exit
	// status not 0) within its tick: same tick, same fencing token, inside
	// the job's timeout. Nil, the default: one attempt.
	Retries *Retries `yaml:"retries,omitempty" json:"retries,omitempty"`
	// Env is added to an exec job's environment (only exec jobs take it).
	// Values may hold ${SHARDCRON_JOB_*} references; PATH is never set by
	// a job (programs are found with the server's PATH).
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// KeepOutput false keeps no output of the job's runs in the history
	// (the response body, the process's stdout and stderr): for targets
	// that answer with data the history's readers must not see. Nil, the
	// default: kept (up to the runner's bound).
	KeepOutput *bool `yaml:"keep_output,omitempty" json:"keep_output,omitempty"`
	// Notify sends a webhook when the job fails, recovers or skips a tick
	// (docs/notifications.md). Nil, the default: the file's
	// defaults.notify, else no notifications.
	Notify *Notify `yaml:"notify,omitempty" json:"notify,omitempty"`

	// Since is when a job of this name was first applied to the cluster; a
	// new owner never runs ticks before it. Set by the job store, not the file.
	Since time.Time `yaml:"-" json:"since,omitzero"`
	// Resumed is when the job was last changed from suspended to not
	// suspended: no owner runs a tick at or before it, so the ticks that came
	// due while the job was suspended never run, and the suspended stretch is
	// not a misfire. Set by the job store, not the file; zero if the job was
	// never resumed.
	Resumed time.Time `yaml:"-" json:"resumed,omitzero"`
	// SuspendedAt is when the job was last changed from not suspended to
	// suspended, kept after the resume: by an apply of its file (stored
	// with the job), or by `shardcron suspend` (the override's own, taken
	// from it when the job set is read); while both hold the job the
	// earlier, once both have lifted it the latest stretch's. A new owner
	// that finds the job suspended, or resumed after it (the gap held the
	// whole suspension), records the ticks before it that nobody ran as
	// skipped. Zero when the job was never suspended, or only by a file
	// or an override written before the job store stamped one (then no
	// new owner decides those ticks). Set by the job store, not the file.
	SuspendedAt time.Time `yaml:"-" json:"suspended_at,omitzero"`
	// Rescheduled is when an apply last changed what yields the job's
	// ticks (RescheduledAfter): the new schedule takes effect then, so no
	// owner catches up a tick of it at or before that instant, which never
	// came due (the owner that heard of the edit arms from then on; a
	// later one would otherwise take it for missed). Ticks of an earlier
	// schedule that are claimed, in line or in flight still run. Set by
	// the job store, not the file; zero if the schedule never changed, or
	// last changed before the job store stamped it.
	Rescheduled time.Time `yaml:"-" json:"rescheduled,omitzero"`
	// ItemsAdded is when each item that was not in the job's first
	// version was added, by item name: no owner runs a tick of that item
	// at or before it (UnitSince). Set by the job store, not the file.
	ItemsAdded map[string]time.Time `yaml:"-" json:"items_added,omitempty"`
}

// Fires returns the job's schedule as the scheduler runs it: its spec (or
// its one-shot At) within StartAt and EndAt, cut after MaxRuns ticks
// counted from Since (from StartAt, or not at all, when Since is zero),
// each tick's fire delayed by Jitter. Its times are fires;
// cronspec.Nominal names each fire's tick.
func (j *Job) Fires() (cronspec.Schedule, error) { return j.ItemFires(Item{}) }

// ItemFires is Fires for one item of a sharded job: the same ticks, each
// item's fire delayed by its own jitter (hashed from the unit's name, so
// the items of one tick do not all land at one instant), and bounded by
// the item's own since (UnitSince), as the scheduler bounds it.
func (j *Job) ItemFires(it Item) (cronspec.Schedule, error) {
	if since := j.UnitSince(it); !since.Equal(j.Since) {
		u := *j // an item added later counts max_runs, and starts, from its addition
		u.Since = since
		j = &u
	}
	var base cronspec.Schedule
	if !j.At.IsZero() {
		base = cronspec.At(j.At)
	} else {
		var err error
		if base, err = cronspec.ParseJob(j.Schedule, j.Timezone, j.Name); err != nil {
			return nil, err
		}
	}
	anchor := j.Since
	if anchor.IsZero() && !j.StartAt.IsZero() {
		anchor = j.StartAt.Add(-time.Nanosecond)
	}
	sh := j.Shape(anchor)
	sh.Name = UnitName(j.Name, it)
	return sh.Apply(base), nil
}

// Shape is what bounds and spreads the job's schedule beyond its spec,
// with MaxRuns counted from anchor. A jittered schedule has no tick at or
// before NotBefore: the scheduler runs none, yet its fire could fall after
// (a schedule without jitter stays shared between jobs: no per-job bound).
func (j *Job) Shape(anchor time.Time) cronspec.Shape {
	sh := cronspec.Shape{StartAt: j.StartAt, EndAt: j.EndAt, MaxRuns: j.MaxRuns, Anchor: anchor, Jitter: j.Jitter.D(), Name: j.Name}
	if j.Jitter > 0 {
		sh.After = j.NotBefore()
	}
	return sh
}

// Shaped reports whether anything beyond the spec and zone shapes the
// job's schedule, making it the job's own.
func (j *Job) Shaped() bool {
	return !j.At.IsZero() || !j.StartAt.IsZero() || !j.EndAt.IsZero() || j.MaxRuns > 0 || j.Jitter > 0
}

// RescheduledAfter returns j's Rescheduled as the job store stamps it
// over prev, the stored job of its name: now when j yields other ticks
// than prev (its schedule, time zone, one-shot instant, window or
// max_runs differ; a jitter moves fires, not ticks), prev's otherwise.
// The simulator, which stands in for the job store, calls it too.
func (j *Job) RescheduledAfter(prev *Job, now time.Time) time.Time {
	if j.Schedule != prev.Schedule || j.Timezone != prev.Timezone || !j.At.Equal(prev.At) ||
		!j.StartAt.Equal(prev.StartAt) || !j.EndAt.Equal(prev.EndAt) || j.MaxRuns != prev.MaxRuns {
		return now
	}
	return prev.Rescheduled
}

// DueAfter is the instant after which the job's current schedule has
// ticks that come due: NotBefore, or Rescheduled if later (the schedule
// took effect then). Catch-up and arming start after it; a tick of an
// earlier schedule still runs after it.
func (j *Job) DueAfter() time.Time {
	if j.Rescheduled.After(j.NotBefore()) {
		return j.Rescheduled
	}
	return j.NotBefore()
}

// NotBefore is the instant at or before which no owner runs a tick of the
// job: the later of Since and Resumed.
func (j *Job) NotBefore() time.Time {
	if j.Resumed.After(j.Since) {
		return j.Resumed
	}
	return j.Since
}

// HTTPTarget is a request the job sends on every tick. URL, header values and
// Body may hold ${SHARDCRON_JOB_*} references, expanded when the job runs
// (Expand).
type HTTPTarget struct {
	// URL is an absolute http:// or https:// URL; it may start with a
	// variable that supplies the scheme and host.
	URL string `yaml:"url" json:"url"`
	// Method is an HTTP method; default POST.
	Method string `yaml:"method,omitempty" json:"method,omitempty"`
	// Headers are sent with the request; names are unique ignoring case,
	// and Shardcron-* names are reserved for the run's identity.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	Body    string            `yaml:"body,omitempty" json:"body,omitempty"`
	// ExpectStatus lists the statuses that count as success; empty means 2xx.
	ExpectStatus []int `yaml:"expect_status,omitempty" json:"expect_status,omitempty"`
	// FollowRedirects says which redirects the request follows: none,
	// same_host or any. Empty, the default: same_host. A redirect is
	// never followed from https to http; Referer is never sent; to another
	// host (any) the job's headers and body are dropped.
	FollowRedirects Redirects `yaml:"follow_redirects,omitempty" json:"follow_redirects,omitempty"`
}

// Keeps says whether the job's run output is kept in the history.
func (j *Job) Keeps() bool { return j.KeepOutput == nil || *j.KeepOutput }

// ExecTarget is a process the job starts on every tick, without a shell
// unless Command names one.
type ExecTarget struct {
	// Command is the program and its arguments (not expanded).
	Command []string `yaml:"command" json:"command"`
	// Dir is the absolute working directory; default the server's.
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
}

// Retries says how often a failed run is attempted again within its tick.
type Retries struct {
	// Attempts is the most attempts of one tick, the first included: 1 to
	// MaxAttempts (10). Required when retries is given.
	Attempts int `yaml:"attempts" json:"attempts"`
	// Backoff is the wait before the first retry; each later one waits
	// twice as long as the one before. More than 0, at most MaxBackoff
	// (1h); default DefaultBackoff (1s).
	Backoff Duration `yaml:"backoff,omitempty" json:"backoff,omitempty"`
}

// Delay is the wait before attempt n (2 for the first retry).
func (r *Retries) Delay(n int) time.Duration {
	d := r.Backoff.D()
	for i := 2; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// JobSet is a validated job set at one version of the cluster's jobs/ key
// space (0 for a set read from a file).
type JobSet struct {
	Version int64
	// Revision is the etcd revision of the newest change the set reflects:
	// the flip to Version, or a later suspend or resume override (package
	// jobstore). 0 for a set read from a file or loaded without overrides.
	// Of two sets of one cluster, the one with the larger (Revision,
	// Version) is the newer.
	Revision int64
	Jobs     []Job
	// FileSuspend holds, for each job an override suspends, its Suspend in
	// the applied set (what the jobs file says), which the job's Suspend in
	// Jobs overrides. Nil when no override suspends a job.
	FileSuspend map[string]bool
}

// NewerThan reports whether s is a newer set of the same cluster than o.
func (s JobSet) NewerThan(o JobSet) bool {
	if s.Revision != o.Revision {
		return s.Revision > o.Revision
	}
	return s.Version > o.Version
}

// Duration is a time.Duration written as "30s" in YAML and JSON.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Kind names the job's target: "http", "exec" or "func".
func (j *Job) Kind() string {
	switch {
	case j.HTTP != nil:
		return "http"
	case j.Exec != nil:
		return "exec"
	default:
		return "func"
	}
}

// WithoutTarget is the job as the HTTP API shows it: without its target
// (URL, headers, body, command), environment and notification webhook,
// the fields where secrets or references to them live, and which no API
// shows (docs/security.md). Kind, read before, still names the target.
func (j Job) WithoutTarget() Job {
	j.HTTP, j.Exec, j.Env = nil, nil, nil
	j.Notify = j.Notify.withoutSecrets()
	return j
}
