package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// OverrideFormat is the version of the override encoding this binary
// writes and the newest it reads.
const OverrideFormat = 1

// Errors of suspend and resume.
var (
	// ErrNoJob: the cluster's job set has no job of that name.
	ErrNoJob = errors.New("jobstore: no such job")
	// ErrSuspendedByFile: resume cannot lift a suspension that the applied
	// jobs file itself sets (suspend: true); only an apply can.
	ErrSuspendedByFile = errors.New("jobstore: suspended by its jobs file")
)

// overrideRetries bounds how often SetSuspended starts over when an apply
// or another suspend or resume wrote in between its read and its write.
const overrideRetries = 5

// Override is an operator's per-job setting kept beside the applied job set
// (jobs/overrides/<job>), which `apply` never writes: a job suspended with
// `shardcron suspend` stays suspended through any apply until `shardcron
// resume`. A job is suspended when its jobs file says so or its override
// does (Effective).
type Override struct {
	Format int `json:"format"`
	// Suspended: `shardcron suspend` holds the job.
	Suspended bool `json:"suspended"`
	// Changed is when suspend or resume last changed the override.
	Changed time.Time `json:"changed"`
	// Resumed is when the override last went from suspended to not: no
	// owner runs a tick at or before it. Zero if never.
	Resumed time.Time `json:"resumed,omitzero"`
	// SuspendedAt is when the override last went from not suspended to
	// suspended, kept after the resume: an owner that takes the shard over
	// after a gap that held the whole suspension decides the ticks before
	// it. Zero if an earlier release wrote the override (then Changed is
	// the instant while it is suspended, and none is known after).
	SuspendedAt time.Time `json:"suspended_at,omitzero"`
	// JobSince is the Since of the job it was written for. An override
	// applies only to that job: a job removed and added again (a new
	// Since) starts without it, even where a collection missed its key.
	JobSince time.Time `json:"job_since"`
	// By says who changed it last ("cli", "http"); informational.
	By string `json:"by,omitempty"`
}

// appliesTo reports whether o was written for j (not for an earlier job of
// the same name).
func (o Override) appliesTo(j *config.Job) bool { return o.JobSince.Equal(j.Since) }

func decodeOverride(key string, v []byte) (Override, error) {
	var o Override
	if err := json.Unmarshal(v, &o); err != nil {
		return Override{}, fmt.Errorf("%w: override %s: %v", ErrCorrupt, key, err)
	}
	if o.Format > OverrideFormat {
		return Override{}, fmt.Errorf("%w: override %s has format %d, this binary knows up to %d", ErrFormat, key, o.Format, OverrideFormat)
	}
	return o, nil
}

// overrideState is the overrides as of a revision, and the newest
// ModRevision among them.
type overrideState struct {
	byJob  map[string]Override
	maxRev int64
}

// loadOverrides reads every override at rev (0: the newest revision). An
// override this binary cannot decode fails the read: an unreadable
// suspension must not silently become a running job.
func loadOverrides(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, rev int64) (overrideState, error) {
	st := overrideState{byJob: map[string]Override{}}
	resp, err := cli.Get(ctx, ks.JobOverrides(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return st, fmt.Errorf("jobstore: read %s: %w", ks.JobOverrides(), err)
	}
	for _, kv := range resp.Kvs {
		job, ok := ks.JobOverrideFromKey(string(kv.Key))
		if !ok {
			continue
		}
		o, err := decodeOverride(string(kv.Key), kv.Value)
		if err != nil {
			return st, badOverride{string(kv.Key), kv.ModRevision, err}
		}
		st.byJob[job] = o
		st.maxRev = max(st.maxRev, kv.ModRevision)
	}
	return st, nil
}

// LoadOverrides returns every job's override, by job name, as stored now.
// Overrides of jobs that are gone, or that came back after a removal, are
// included; Effective ignores them.
func LoadOverrides(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (map[string]Override, error) {
	st, err := loadOverrides(ctx, cli, ks, 0)
	return st.byJob, err
}

// LoadEffective returns the cluster's job set with its overrides applied
// (Effective), read at one revision: what replicas run.
func LoadEffective(ctx context.Context, cli *clientv3.Client, ks keyspace.Space) (config.JobSet, error) {
	set, p, err := loadCurrent(ctx, cli, ks)
	if err != nil {
		return set, err
	}
	return withOverrides(ctx, cli, ks, set, p)
}

// withOverrides is set, read through pointer p, with the overrides as of
// p's read revision applied (Effective), and its Revision the newer of the
// pointer's and the overrides'.
func withOverrides(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, set config.JobSet, p pointer) (config.JobSet, error) {
	st, err := loadOverrides(ctx, cli, ks, p.readRev)
	if err != nil {
		return set, err
	}
	set.Revision = max(p.modRev, st.maxRev)
	return Effective(set, st.byJob), nil
}

// Effective returns set with ovs applied: a job is suspended when the set
// says so or its override does, its Resumed is the later of the two
// layers' (so no tick that came due while either held it ever runs) and
// its SuspendedAt the earlier of their suspensions. Jobs
// is copied only when an override changes a job; set itself is not
// modified. FileSuspend records the applied Suspend of every job an
// override suspends.
func Effective(set config.JobSet, ovs map[string]Override) config.JobSet {
	out := set
	copied := false
	for i := range set.Jobs {
		j := &set.Jobs[i]
		e, ok := overridden(j, ovs)
		if !ok {
			continue
		}
		if !copied {
			out.Jobs = append([]config.Job(nil), set.Jobs...)
			out.FileSuspend = maps.Clone(set.FileSuspend)
			copied = true
		}
		out.Jobs[i] = e
		if ovs[j.Name].Suspended {
			if out.FileSuspend == nil {
				out.FileSuspend = map[string]bool{}
			}
			out.FileSuspend[j.Name] = j.Suspend
		}
	}
	return out
}

// overridden is j as its override in ovs makes it, and whether that
// differs from j (a copy: j is left as it is).
func overridden(j *config.Job, ovs map[string]Override) (config.Job, bool) {
	o, ok := ovs[j.Name]
	if !ok || !o.appliesTo(j) || (!o.Suspended && !o.Resumed.After(j.Resumed)) {
		return config.Job{}, false
	}
	e := *j
	if o.Suspended {
		// Suspended since the earlier of the two layers' suspensions; a
		// file's suspension of unknown start (stored unstamped) stays so.
		at := o.SuspendedAt
		if at.IsZero() { // written by an earlier release
			at = o.Changed
		}
		if !e.Suspend || (!e.SuspendedAt.IsZero() && at.Before(e.SuspendedAt)) {
			e.SuspendedAt = at
		}
		e.Suspend = true
	}
	if o.Resumed.After(e.Resumed) {
		e.Resumed = o.Resumed
		if !e.Suspend {
			// The latest stretch is the override's: its start, if known.
			e.SuspendedAt = o.SuspendedAt
		}
	}
	return e, true
}

// OverrideOptions tunes SetSuspended.
type OverrideOptions struct {
	// Now stamps the change (Resumed, on a resume). Default time.Now.
	Now func() time.Time
	// By is recorded as who changed it ("cli", "http").
	By string
}

// SuspendResult is the outcome of SetSuspended.
type SuspendResult struct {
	// Suspended is the job's effective state afterwards; ByFile and
	// ByOverride say which layer holds it.
	Suspended, ByFile, ByOverride bool
	// Changed is false when the job already was in the asked state
	// (nothing written).
	Changed bool
	// Resumed is the job's effective Resumed afterwards.
	Resumed time.Time
	// Revision is the etcd revision of the write (of the read, when
	// nothing was written).
	Revision int64
}

// SetSuspended suspends (suspend true) or resumes one job through its
// override, leaving the applied job set untouched. Suspending a suspended
// job, or resuming one that is not suspended, writes nothing. A resume of a
// job whose jobs file says suspend: true fails with ErrSuspendedByFile and
// writes nothing (the override, if any, stays). A resume stamps Resumed
// with now, so no owner ever runs a tick that came due while the job was
// suspended. The write is one transaction guarded by the job set pointer
// and the override key being as read: a concurrent apply that removed the
// job, or another suspend or resume, makes it read again (a few times, then
// ErrConflict).
func SetSuspended(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, job string, suspend bool, opts OverrideOptions) (SuspendResult, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for range overrideRetries {
		res, done, err := setSuspendedOnce(ctx, cli, ks, job, suspend, opts)
		if err != nil || done {
			return res, err
		}
	}
	return SuspendResult{}, fmt.Errorf("%w: job %q kept changing while being %s", ErrConflict, job, map[bool]string{true: "suspended", false: "resumed"}[suspend])
}

func setSuspendedOnce(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, name string, suspend bool, opts OverrideOptions) (SuspendResult, bool, error) {
	set, p, err := loadNamed(ctx, cli, ks, []string{name}) // its part, not the set
	if err != nil {
		return SuspendResult{}, false, err
	}
	if len(set.Jobs) == 0 {
		return SuspendResult{}, false, fmt.Errorf("%w: %q is not in the cluster's job set (version %d)", ErrNoJob, name, set.Version)
	}
	job := &set.Jobs[0]
	key := ks.JobOverride(name)
	resp, err := cli.Get(ctx, key, clientv3.WithRev(p.readRev))
	if err != nil {
		return SuspendResult{}, false, fmt.Errorf("jobstore: read %s: %w", key, err)
	}
	var cur Override
	var modRev int64
	if len(resp.Kvs) > 0 {
		modRev = resp.Kvs[0].ModRevision
		if cur, err = decodeOverride(key, resp.Kvs[0].Value); err != nil {
			return SuspendResult{}, false, err
		}
		if !cur.appliesTo(job) {
			cur = Override{} // left by an earlier job of this name
		}
	}
	state := func(o Override, rev int64) SuspendResult {
		e := Effective(config.JobSet{Jobs: []config.Job{*job}}, map[string]Override{name: o}).Jobs[0]
		return SuspendResult{Suspended: e.Suspend, ByFile: job.Suspend, ByOverride: o.Suspended, Resumed: e.Resumed, Revision: rev}
	}
	switch {
	case suspend && cur.Suspended:
		return state(cur, p.readRev), true, nil
	case !suspend && job.Suspend:
		return state(cur, p.readRev), true, fmt.Errorf("%w: job %q says suspend: true in the applied job set; apply a file without it (resume lifts only `shardcron suspend`)", ErrSuspendedByFile, name)
	case !suspend && !cur.Suspended:
		return state(cur, p.readRev), true, nil
	}
	now := opts.Now().UTC().Round(0)
	next := Override{Format: OverrideFormat, Suspended: suspend, Changed: now, Resumed: cur.Resumed, SuspendedAt: cur.SuspendedAt, JobSince: job.Since, By: opts.By}
	if suspend {
		next.SuspendedAt = now
	} else {
		next.Resumed = now
	}
	v, err := json.Marshal(next)
	if err != nil {
		return SuspendResult{}, false, err
	}
	txn, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(ks.JobsCurrent()), "=", p.modRev),
			clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, string(v))).
		Commit()
	if err != nil {
		return SuspendResult{}, false, fmt.Errorf("jobstore: write %s, outcome unknown: %w", key, err)
	}
	if !txn.Succeeded {
		return SuspendResult{}, false, nil // changed in between: read again
	}
	res := state(next, txn.Header.Revision)
	res.Changed = true
	return res, true, nil
}
