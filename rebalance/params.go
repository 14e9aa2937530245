package rebalance

import (
	"fmt"
	"math"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// HashVersion names the ring's placement algorithm: the hashing library,
// its version and the hasher. Placement differs between library versions,
// so the version is stored in the cluster's meta and every replica obeys it.
const HashVersion = "consistent-v1.0.0+xxhash64"

// Defaults of Params.
const (
	DefaultShards            = 1024
	DefaultLoadFactor        = 1.1
	DefaultReplicationFactor = 200
)

// MaxReplicationFactor bounds the ring's virtual nodes per member, which
// keeps Assign's cost (members × replication factor hashes and a sort)
// reasonable.
const MaxReplicationFactor = 1000

// MaxLoadFactor bounds the load factor; beyond a few the bound stops
// balancing anything.
const MaxLoadFactor = 100

// Params are the ring's parameters. They are written once into the
// cluster's meta and every replica uses the stored values.
type Params struct {
	// Shards is S, the number of shards: 1 to keyspace.MaxShards. Default
	// 1,024.
	Shards int
	// LoadFactor bounds each member's load at ceil(S/N × LoadFactor). It
	// must be at least 1 (the library panics below). Larger values move
	// fewer shards on a join but balance less. Default 1.1.
	LoadFactor float64
	// ReplicationFactor is the number of virtual nodes per member on the
	// ring: 1 to MaxReplicationFactor. More points make the ring finer, so
	// members' loads sit nearer the average before the bound acts and a
	// join moves nearer the ideal S/N; the ring's construction costs more.
	// Default 200 (with load factor 1.1 and S = 1,024: the busiest member
	// holds at most 1.11× the average, a join moves about 1.03× the ideal
	// at the median; docs/design.md, "Two-level mapping").
	ReplicationFactor int
	// HashVersion must equal the package's HashVersion; a cluster created
	// with another placement cannot be served by this build.
	HashVersion string
}

// Default returns the default parameters for shards shards.
func Default(shards int) Params {
	return Params{
		Shards:            shards,
		LoadFactor:        DefaultLoadFactor,
		ReplicationFactor: DefaultReplicationFactor,
		HashVersion:       HashVersion,
	}
}

// Validate reports the first parameter that is out of range.
func (p Params) Validate() error {
	switch {
	case p.Shards < 1 || p.Shards > keyspace.MaxShards:
		return fmt.Errorf("%w: shards %d: must be 1 to %d", ErrInvalidConfig, p.Shards, keyspace.MaxShards)
	case math.IsNaN(p.LoadFactor) || p.LoadFactor < 1 || p.LoadFactor > MaxLoadFactor:
		return fmt.Errorf("%w: load factor %v: must be 1 to %d", ErrInvalidConfig, p.LoadFactor, MaxLoadFactor)
	case p.ReplicationFactor < 1 || p.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("%w: replication factor %d: must be 1 to %d", ErrInvalidConfig, p.ReplicationFactor, MaxReplicationFactor)
	case p.HashVersion != HashVersion:
		return fmt.Errorf("%w: hash version %q: this build implements %q", ErrInvalidConfig, p.HashVersion, HashVersion)
	}
	return nil
}

// Bound is the most shards any one of members members may be desired for:
// ceil(S/N × LoadFactor), computed as the library does.
func (p Params) Bound(members int) int {
	if members < 1 {
		return 0
	}
	return int(math.Ceil(float64(p.Shards) / float64(members) * p.LoadFactor))
}
