package jobstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// etcd refuses requests over 1.5 MiB (--max-request-bytes) and transactions
// over 128 operations (--max-txn-ops). Chunk writes stay well under both.
const (
	maxTxnBytes = 1 << 20
	maxTxnOps   = 64
	// maxChunkBytes keeps one chunk, even incompressible, under etcd's
	// request limit with room for the key and the request's framing.
	maxChunkBytes = 1 << 20
)

// testHookBeforeFlip, when set by a test, runs after an apply has written
// its chunks and before it flips, to line up concurrent applies or to
// simulate a crash. Always nil outside tests.
var testHookBeforeFlip func()

// ApplyOptions tunes Apply. The zero value is usable: every zero field takes
// the default of DefaultApplyOptions.
type ApplyOptions struct {
	// ChunkBytes bounds one chunk's JSON before compression. Default 1 MiB,
	// which is also the maximum: a chunk must fit one etcd request even if
	// it does not compress.
	ChunkBytes int
	// Now gives the Since of newly added jobs. Default time.Now.
	Now func() time.Time
	// Logger receives garbage-collection warnings. Default: discard.
	Logger *slog.Logger
	// Shards, when set, writes the set in format 2, a part per shard of a
	// cluster of that many shards, copy-on-write: the apply writes only the
	// parts of shards whose jobs changed. Zero writes format 1, which every
	// release reads: give Shards only when every member of the cluster
	// reads format 2 (shard.MemberInfo.JobSetFormat).
	Shards int
	// Format is the format to write: 0 is 2 with Shards and 1 without (what
	// every release since format 2 reads); 3 (with Shards) names the parts
	// through pages, so that a one-job edit writes its part, one page and
	// a pointer of about √Shards refs. Ask for 3 only when every member
	// reads it.
	Format int
	// Rewrite writes an unchanged set again when its stored format or
	// shard count is not the one asked for. Without it an unchanged set
	// is rewritten only from format 2 to format 1 (a member may need
	// format 1 to read it); from 1 to 2 it waits for the next change.
	Rewrite bool
	// ReplaceCorrupt lets Apply replace a current set that fails its checks
	// (ErrCorrupt: edited by hand, chunks deleted), treating every job as
	// new (Since = now). Without it such an Apply fails, so that Since is
	// never lost silently.
	ReplaceCorrupt bool
}

// DefaultApplyOptions returns the options with every default filled in.
func DefaultApplyOptions() ApplyOptions {
	return ApplyOptions{ChunkBytes: maxChunkBytes, Now: time.Now, Logger: slog.New(slog.DiscardHandler)}
}

// Validate checks the options, zero fields counting as their defaults,
// wrapping ErrInvalidConfig.
func (o ApplyOptions) Validate() error {
	if o.ChunkBytes != 0 && (o.ChunkBytes < 4<<10 || o.ChunkBytes > maxChunkBytes) {
		return fmt.Errorf("%w: ChunkBytes %d: must be between 4 KiB and %d", ErrInvalidConfig, o.ChunkBytes, maxChunkBytes)
	}
	if o.Shards < 0 || o.Shards > keyspace.MaxShards {
		return fmt.Errorf("%w: Shards %d: must be between 0 and %d", ErrInvalidConfig, o.Shards, keyspace.MaxShards)
	}
	if o.Format < 0 || o.Format > Format || (o.Format == 1 && o.Shards != 0) || (o.Format >= 2 && o.Shards == 0) {
		return fmt.Errorf("%w: Format %d with Shards %d: want 0, 1 without Shards, or 2 to %d with them", ErrInvalidConfig, o.Format, o.Shards, Format)
	}
	return nil
}

// format is the format the options write.
func (o ApplyOptions) format() int {
	switch {
	case o.Format != 0:
		return o.Format
	case o.Shards > 0:
		return 2
	}
	return 1
}

func (o ApplyOptions) withDefaults() ApplyOptions {
	d := DefaultApplyOptions()
	if o.ChunkBytes == 0 {
		o.ChunkBytes = d.ChunkBytes
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	return o
}

// Result is the outcome of an Apply.
type Result struct {
	// Version is the current version after the apply: the new one, or the
	// unchanged current one when the set was identical (Applied false).
	Version int64
	// Applied reports whether a new version was written and flipped to.
	Applied bool
	// Diff is what changed from the previous set.
	Diff Diff
	// Format is the new version's format (1 to Format).
	Format int
	// Parts, Chunks and Bytes are what the apply wrote: the new version's
	// parts (format 2, 3), chunks and stored (compressed) size. A format 2
	// or 3 apply writes only the parts of the shards whose jobs changed.
	Parts  int
	Chunks int
	Bytes  int64
	// Pages is how many pages (format 3) the apply wrote: those that name
	// a changed part.
	Pages int
	// Put is every byte the apply put into etcd, keys and values: chunks,
	// pages, the version reservation and the pointer.
	Put int64
	// GCErr is the error of the garbage collection that follows a
	// successful flip, if any. The apply itself succeeded; the next apply
	// collects what this one could not.
	GCErr error
}

// Apply replaces the cluster's job set with jobs: it writes a new version's
// chunks (as many transactions as the size needs), then flips jobs/current
// in one transaction compare-and-swapped on the pointer it read, then
// deletes superseded versions and the checkpoint records of removed jobs.
// If jobs hold the same definitions as the current set, nothing is written.
// A concurrent apply that flipped first makes this one fail with
// ErrConflict; it deletes the version it wrote, and whatever a crash or an
// error leaves behind the next successful apply deletes.
func Apply(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, jobs []config.Job, opts ApplyOptions) (Result, error) {
	return apply(ctx, cli, ks, jobs, opts, false)
}

// DryRun reports what Apply would change, without writing anything.
func DryRun(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, jobs []config.Job) (Diff, error) {
	if err := checkNames(jobs); err != nil {
		return Diff{}, err
	}
	cur, p, err := loadCurrent(ctx, cli, ks)
	if err != nil {
		return Diff{}, err
	}
	d := DiffJobs(cur.Jobs, jobs)
	d.Suspended, err = keptSuspended(ctx, cli, ks, p.readRev, cur.Jobs, jobs)
	return d, err
}

// keptSuspended lists the jobs of next that an override suspends, read at
// rev, for the diff an apply reports. Only jobs already in current can
// have one (a job new to the set gets a new Since, which no override
// carries).
func keptSuspended(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, rev int64, current, next []config.Job) ([]string, error) {
	st, err := loadOverrides(ctx, cli, ks, rev)
	if err != nil || len(st.byJob) == 0 {
		return nil, err
	}
	inNext := make(map[string]bool, len(next))
	for i := range next {
		inNext[next[i].Name] = true
	}
	var out []string
	for i := range current {
		if o, ok := st.byJob[current[i].Name]; ok && o.Suspended && o.appliesTo(&current[i]) && inNext[current[i].Name] {
			out = append(out, current[i].Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Bootstrap applies jobs only when the cluster has no job set yet (the
// server's --jobs). Of several replicas bootstrapping at once exactly one
// applies; the others, like every replica started on a cluster that has a
// job set, get applied false and the difference between the cluster's set
// and jobs (the drift, for the caller to log and count). A cluster whose
// set fails its checks (ErrCorrupt) has a set: Bootstrap never replaces
// it, logs the error and reports no drift, so replicas still start (and
// keep their last good set, see Watch) until an apply repairs it. Errors
// are returned only when the outcome is unknown (etcd unreachable), for
// invalid jobs, and for ErrFormat (this binary is older than the data).
func Bootstrap(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, jobs []config.Job, opts ApplyOptions) (applied bool, drift Diff, err error) {
	opts.ReplaceCorrupt = false
	res, err := apply(ctx, cli, ks, jobs, opts, true)
	if err == nil {
		return res.Applied, res.Diff, nil
	}
	if errors.Is(err, ErrCorrupt) {
		opts.withDefaults().Logger.Error("the cluster's job set is unreadable; --jobs not applied, drift unknown; `shardcron apply` repairs it", "err", err)
		return false, Diff{}, nil
	}
	if !errors.Is(err, ErrConflict) {
		return false, Diff{}, err
	}
	if res.Version != 0 {
		return false, res.Diff, nil // a set was there before we started
	}
	// Another replica flipped first: compare with what it applied.
	cur, err := Load(ctx, cli, ks)
	if err != nil {
		return false, Diff{}, err
	}
	return false, DiffJobs(cur.Jobs, jobs), nil
}

func apply(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, jobs []config.Job, opts ApplyOptions, onlyIfEmpty bool) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	opts = opts.withDefaults()
	if err := checkNames(jobs); err != nil {
		return Result{}, err
	}
	cur, p, err := loadCurrent(ctx, cli, ks)
	if errors.Is(err, ErrCorrupt) && opts.ReplaceCorrupt && p.modRev != 0 {
		opts.Logger.Warn("replacing a corrupt job set; every job counts as new", "version", p.Version, "err", err)
		cur, err = config.JobSet{Version: p.Version}, nil
		p.Parts, p.Pages = nil, nil // nothing of a corrupt set is named again
	}
	if err != nil {
		return Result{}, err
	}
	diff, same := diffJobs(cur.Jobs, jobs)
	if diff.Suspended, err = keptSuspended(ctx, cli, ks, p.readRev, cur.Jobs, jobs); err != nil {
		return Result{}, err
	}
	if onlyIfEmpty && p.modRev != 0 {
		return Result{Version: cur.Version, Diff: diff}, fmt.Errorf("%w: version %d is current", ErrConflict, cur.Version)
	}
	if diff.Empty() && (p.modRev != 0 || len(jobs) == 0) && !p.relayout(opts) {
		return Result{Version: cur.Version, Diff: diff}, nil
	}

	next, asIs := withSince(cur.Jobs, jobs, opts.Now(), same)
	cur.Jobs, same = nil, nil // free to collect while the new set is encoded: at a million jobs, hundreds of megabytes
	// The version is the revision of a write made after reading the
	// pointer: unique, and larger than every version flipped before that
	// read, which is what lets garbage collection delete every lower one.
	seq, err := cli.Put(ctx, ks.JobsSeq(), "")
	if err != nil {
		return Result{}, fmt.Errorf("jobstore: reserve a version: %w", err)
	}
	version := seq.Header.Revision
	np, res, err := writeVersion(ctx, cli, ks, next, asIs, version, p, opts)
	if err != nil {
		return Result{}, err
	}
	np.AppliedAt = opts.Now().UTC()
	pv, err := np.encode()
	if err != nil {
		return Result{}, fmt.Errorf("jobstore: encode pointer: %w", err)
	}
	if testHookBeforeFlip != nil {
		testHookBeforeFlip()
	}
	flip, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(ks.JobsCurrent()), "=", p.modRev)).
		Then(clientv3.OpPut(ks.JobsCurrent(), string(pv))).
		Commit()
	if err != nil {
		// The flip may or may not have happened: not a conflict.
		return Result{}, fmt.Errorf("jobstore: flip to version %d, outcome unknown: %w", version, err)
	}
	if !flip.Succeeded {
		// This version can never become current (its flip is the only
		// one it gets), so deleting it is safe; what a failure here leaves
		// behind, the next successful apply deletes.
		if _, err := cli.Delete(ctx, ks.JobSet(version), clientv3.WithPrefix()); err != nil {
			opts.Logger.Warn("delete the chunks of a version that lost its flip; the next apply collects them", "version", version, "err", err)
		}
		return Result{}, fmt.Errorf("%w: version %d was read as current and replaced before version %d could flip", ErrConflict, cur.Version, version)
	}
	res.Version, res.Applied, res.Diff = version, true, diff
	res.Put += int64(len(ks.JobsSeq()) + len(ks.JobsCurrent()) + len(pv))
	res.GCErr = collect(ctx, cli, ks, np, flip.Header.Revision, next, opts)
	if res.GCErr != nil {
		opts.Logger.Warn("job set garbage collection incomplete; the next apply retries", "version", version, "err", res.GCErr)
	}
	return res, nil
}

// writeVersion writes the chunks of version holding next, in format 2 or
// 3 when opts.Shards is set (only the parts, and pages, that differ from
// those of prev; asIs as planParts takes it), else in format 1, and
// returns its pointer (to flip to) and what it wrote.
func writeVersion(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, next []config.Job, asIs []bool, version int64, prev pointer, opts ApplyOptions) (pointer, Result, error) {
	var (
		np     pointer
		res    Result
		writes []kv
	)
	if opts.Shards > 0 {
		plan, err := planParts(ks, next, asIs, opts.Shards, opts.ChunkBytes, version, prev)
		if err != nil {
			return pointer{}, Result{}, err
		}
		np, writes = partsPointer(version, opts.Shards, plan.parts), plan.write
		res = Result{Format: 2, Parts: plan.written, Chunks: plan.chunks, Bytes: plan.bytes}
		if opts.format() >= 3 {
			var pages []kv
			if np, pages, err = pagedPointer(ks, np, prev); err != nil {
				return pointer{}, Result{}, err
			}
			writes = append(writes, pages...)
			res.Format, res.Pages = 3, len(pages)
		}
	} else {
		enc, err := encodeJobs(len(next), func(i int) *config.Job { return &next[i] }, opts.ChunkBytes, 1, true)
		if err != nil {
			return pointer{}, Result{}, err
		}
		np = pointer{Format: 1, Version: version, Chunks: len(enc.chunks), Jobs: len(next), Digest: enc.digest, Bytes: enc.bytes}
		for i, c := range enc.chunks {
			writes = append(writes, kv{ks.JobChunk(version, i), c})
		}
		res = Result{Format: 1, Chunks: len(enc.chunks), Bytes: enc.bytes}
	}
	for _, w := range writes {
		res.Put += int64(len(w.key) + len(w.val))
	}
	if err := writeChunks(ctx, cli, writes); err != nil {
		return pointer{}, Result{}, fmt.Errorf("jobstore: write version %d (left for the next apply to collect): %w", version, err)
	}
	return np, res, nil
}

// writeChunks writes a version's chunks, several to a transaction within
// etcd's limits. Chunk keys are new (the version is unique), so no
// comparison is needed.
func writeChunks(ctx context.Context, cli *clientv3.Client, chunks []kv) error {
	var (
		ops   []clientv3.Op
		bytes int
	)
	commit := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		ops, bytes = ops[:0], 0
		return err
	}
	for _, c := range chunks {
		if len(ops) == maxTxnOps || (len(ops) > 0 && bytes+len(c.key)+len(c.val) > maxTxnBytes) {
			if err := commit(); err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(c.key, string(c.val)))
		bytes += len(c.key) + len(c.val)
	}
	return commit()
}

func checkNames(jobs []config.Job) error {
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		n := jobs[i].Name
		if n == "" {
			return fmt.Errorf("%w: job %d has no name", ErrInvalid, i+1)
		}
		if seen[n] {
			return fmt.Errorf("%w: job %q appears twice", ErrInvalid, n)
		}
		seen[n] = true
	}
	return nil
}
