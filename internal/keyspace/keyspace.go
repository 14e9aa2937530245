// Package keyspace names every key shardcron keeps in etcd.
//
// All keys live under /shardcron/<cluster>/. Prefixes are chosen so that a
// replica watches only what it must: own/ and jobs/, never ticks/ or runs/
// (docs/design.md, "Key space"). Job names never start with "_", so the
// ticks/<shard>/_released marker cannot collide with a job record.
package keyspace

import (
	"github.com/cespare/xxhash/v2"

	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxShards bounds S so that a shard number always fits the zero-padded
// width of shard keys, which keeps keys sorted numerically.
const MaxShards = 65536

const shardWidth = 5

var clusterName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidCluster reports whether name can be used as a cluster name.
func ValidCluster(name string) error {
	if !clusterName.MatchString(name) {
		return fmt.Errorf("cluster name %q: must match [a-z0-9][a-z0-9._-]* and be at most 63 characters", name)
	}
	return nil
}

// Space is the key space of one cluster. The zero value is not usable; build
// one with New.
type Space struct {
	root string
}

// New returns the key space of cluster. The caller validates the name.
func New(cluster string) Space {
	return Space{root: "/shardcron/" + cluster + "/"}
}

// Root is the prefix of every key of the cluster.
func (s Space) Root() string { return s.root }

// Meta holds S, the ring parameters, the format version and the cluster epoch.
func (s Space) Meta() string { return s.root + "meta" }

// Own is the prefix every replica watches: members and shard leases.
func (s Space) Own() string { return s.root + "own/" }

// Members is the prefix of member keys.
func (s Space) Members() string { return s.root + "own/members/" }

// Member is the key a node registers on its own lease.
func (s Space) Member(node string) string { return s.Members() + node }

// MemberFromKey returns the node id of a member key.
func (s Space) MemberFromKey(key string) (string, bool) {
	node, ok := strings.CutPrefix(key, s.Members())
	return node, ok && node != ""
}

// Shards is the prefix of shard lease keys.
func (s Space) Shards() string { return s.root + "own/shards/" }

// Shard is the lease key of shard; its CreateRevision is the generation.
func (s Space) Shard(shard int) string { return s.Shards() + pad(shard) }

// ShardFromKey returns the shard number of a shard lease key.
func (s Space) ShardFromKey(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, s.Shards())
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0 && len(rest) == shardWidth
}

// Ticks is the prefix of every shard's checkpoint records.
func (s Space) Ticks() string { return s.root + "ticks/" }

// ShardTicks is the prefix of shard's checkpoint records, read in one ranged
// Get when the shard is acquired.
func (s Space) ShardTicks(shard int) string { return s.Ticks() + pad(shard) + "/" }

// Released is the marker of shard's last graceful release.
func (s Space) Released(shard int) string { return s.ShardTicks(shard) + "_released" }

// Tick is the checkpoint record of job in shard.
func (s Space) Tick(shard int, job string) string { return s.ShardTicks(shard) + job }

// Journal is the prefix of the completion journal (scheduler/journal.go):
// values naming runs that ended before their records said so, read with
// every checkpoint. Outside ticks/, whose every key a checkpoint read takes
// for a record or a marker.
func (s Space) Journal() string { return s.root + "journal/" }

// JournalSession is the prefix of one replica session's journal values:
// the node and its lease, in hex, so a restarted node never writes over
// (or deletes) what its crashed predecessor wrote.
func (s Space) JournalSession(node string, lease int64) string {
	return s.Journal() + node + "/" + strconv.FormatInt(lease, 16) + "/"
}

// JournalValue is one journal write of a session, seq zero-padded so a
// session's values sort in order.
func (s Space) JournalValue(node string, lease, seq int64) string {
	return fmt.Sprintf("%s%020d", s.JournalSession(node, lease), seq)
}

// Jobs is the prefix of the versioned job set.
func (s Space) Jobs() string { return s.root + "jobs/" }

// pad is on the fire path (every record key): no fmt.
func pad(shard int) string {
	s := strconv.Itoa(shard)
	if len(s) >= shardWidth {
		return s
	}
	return "00000"[:shardWidth-len(s)] + s
}

// versionWidth zero-pads job set versions (etcd revisions, at most 19
// digits) so that keys sort numerically and one DeleteRange can drop every
// version below a given one.
const versionWidth = 20

// JobsCurrent is the pointer to the current job set version; the only jobs/
// key replicas watch.
func (s Space) JobsCurrent() string { return s.Jobs() + "current" }

// JobsSeq is written once per apply; the revision of that write is the new
// job set's version, unique and larger than every earlier flipped version.
func (s Space) JobsSeq() string { return s.Jobs() + "seq" }

// JobSets is the prefix of every stored job set version.
func (s Space) JobSets() string { return s.Jobs() + "sets/" }

// JobSet is the prefix of one job set version's chunks.
func (s Space) JobSet(version int64) string {
	return fmt.Sprintf("%s%0*d/", s.JobSets(), versionWidth, version)
}

// JobChunk is one chunk of a job set version.
func (s Space) JobChunk(version int64, chunk int) string {
	return fmt.Sprintf("%s%06d", s.JobSet(version), chunk)
}

// JobParts is the prefix of the chunks of one shard's part of a job set
// version (format 2): a version holds parts only for the shards whose jobs
// changed in the apply that wrote it.
func (s Space) JobParts(version int64, shard int) string {
	return s.JobSet(version) + pad(shard) + "."
}

// JobPart is one chunk of a shard's part of a job set version.
func (s Space) JobPart(version int64, shard, chunk int) string {
	return fmt.Sprintf("%s%04d", s.JobParts(version, shard), chunk)
}

// JobPage is one page of a job set version (format 3): the list of the
// parts of a run of shards, named by the pointer. Its name has no '.', so
// it never shares a prefix with a part's chunks.
func (s Space) JobPage(version int64, page int) string {
	return s.JobSet(version) + "p" + pad(page)
}

// TickFromKey returns the shard and job name of a job's checkpoint record
// key; it reports false for the _released marker and any other key.
func (s Space) TickFromKey(key string) (shard int, job string, ok bool) {
	rest, ok := strings.CutPrefix(key, s.Ticks())
	if !ok || len(rest) < shardWidth+2 || rest[shardWidth] != '/' {
		return 0, "", false
	}
	n, err := strconv.Atoi(rest[:shardWidth])
	job = rest[shardWidth+1:]
	if err != nil || n < 0 || job == "" || strings.HasPrefix(job, "_") || strings.Contains(job, "/") {
		return 0, "", false
	}
	return n, job, true
}

// ShardOf maps a job to its shard: xxhash64(name) mod shards. Every replica,
// the job store, the status command and the dashboard use this one mapping;
// it lives beside the key space because a job's record key depends on it.
func ShardOf(job string, shards int) int {
	if shards < 1 {
		return 0
	}
	return int(xxhash.Sum64String(job) % uint64(shards))
}

// JobOverrides is the prefix of the per-job overrides (`shardcron suspend`
// and `resume`): one key per job, kept apart from the applied job set so
// that an apply neither needs to know of them nor undoes them.
func (s Space) JobOverrides() string { return s.Jobs() + "overrides/" }

// JobOverride is job's override key.
func (s Space) JobOverride(job string) string { return s.JobOverrides() + job }

// JobOverrideFromKey returns the job name of an override key.
func (s Space) JobOverrideFromKey(key string) (string, bool) {
	job, ok := strings.CutPrefix(key, s.JobOverrides())
	return job, ok && job != "" && !strings.Contains(job, "/")
}

// JobsWatchEnd ends the one key range replicas watch, [JobsCurrent,
// JobsWatchEnd): it holds jobs/current and every key under jobs/overrides/,
// and none of the (large) chunk keys under jobs/sets/. No other key may
// sort between "jobs/current" and "jobs/overrides/".
func (s Space) JobsWatchEnd() string {
	p := s.JobOverrides()
	return p[:len(p)-1] + string(rune(p[len(p)-1]+1))
}
