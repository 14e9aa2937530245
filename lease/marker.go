package lease

import (
	"encoding/json"
	"fmt"
	"time"
)

// MarkerFormat is the format version of the _released marker this package
// writes and the newest it reads.
const MarkerFormat = 1

// Marker is the value of ticks/<shard>/_released, written (without a lease)
// in the transaction that deletes the shard's lease key on a graceful
// release. The successor runs every tick due since StoppedAt, whatever the
// job's misfire policy: a handoff is not a misfire.
type Marker struct {
	// StoppedAt is when the releasing owner stopped firing the shard.
	StoppedAt time.Time `json:"stopped_at"`
	// Generation is the fencing token the releasing owner held.
	Generation int64 `json:"generation"`
	// Format is the marker's format version (MarkerFormat when written).
	Format int `json:"format"`
	// Handed names, by job, the ticks in flight that the releasing owner
	// never started: the successor runs them as ordinary runs, and every
	// other tick in flight as a possible re-run. An earlier release's
	// marker has none (it names nothing), and so has a marker whose list
	// would pass MaxHandedBytes: naming fewer ticks only marks more runs
	// as possible re-runs, never fewer. Older replicas ignore the field, so
	// the format stays 1.
	Handed map[string][]time.Time `json:"handed,omitempty"`
}

// MaxHandedBytes bounds the encoded list of handed ticks in one marker, so
// that a release of a shard with very many jobs stays well within etcd's
// request size limit (1.5 MiB by default) and batches of releases do too.
const MaxHandedBytes = 256 << 10

// maxReleaseBytes bounds the markers one release transaction writes, well
// under etcd's default request limit of 1.5 MiB.
const maxReleaseBytes = 1 << 20

// Encode returns the stored form of m, with Format set to MarkerFormat.
func (m Marker) Encode() []byte {
	m.Format = MarkerFormat
	m.StoppedAt = m.StoppedAt.UTC()
	b, _ := json.Marshal(m) // cron ticks and a stopped_at are within JSON's range of times
	if len(b) > MaxHandedBytes {
		m.Handed = nil
		b, _ = json.Marshal(m)
	}
	return b
}

// ParseMarker decodes a stored marker. It refuses a format newer than
// MarkerFormat: a replica must not act on data written by a newer version
// it does not understand.
func ParseMarker(b []byte) (Marker, error) {
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return Marker{}, fmt.Errorf("%w: released marker: %v", ErrInvalid, err)
	}
	switch {
	case m.Format > MarkerFormat:
		return Marker{}, fmt.Errorf("%w: released marker has format %d, newer than %d which this version of shardcron reads; upgrade this replica", ErrInvalid, m.Format, MarkerFormat)
	case m.Format < 1:
		return Marker{}, fmt.Errorf("%w: released marker has no format version", ErrInvalid)
	case m.StoppedAt.IsZero():
		return Marker{}, fmt.Errorf("%w: released marker has no stopped_at", ErrInvalid)
	}
	return m, nil
}
