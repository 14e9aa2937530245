package jobstore

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Format is the version of the job set encoding this binary writes and the
// newest it reads.
const Format = 1

// maxChunkDecoded bounds a chunk's decompressed size on read, far above
// any chunk this package writes, so a damaged value cannot exhaust memory.
const maxChunkDecoded = 64 << 20

// pointer is the value of jobs/current.
type pointer struct {
	Format    int       `json:"format"`
	Version   int64     `json:"version"`
	Chunks    int       `json:"chunks"`
	Jobs      int       `json:"jobs"`
	Digest    string    `json:"digest"` // "sha256:<hex>" of the uncompressed chunks, in order
	Bytes     int64     `json:"bytes"`  // stored (compressed) bytes of all chunks
	AppliedAt time.Time `json:"applied_at"`

	modRev  int64 // the pointer key's ModRevision; 0 when absent
	readRev int64 // the revision the pointer was read at
}

func decodePointer(v []byte) (pointer, error) {
	// The format is read first, on its own, so a newer layout is refused
	// with ErrFormat rather than misread.
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(v, &head); err != nil {
		return pointer{}, fmt.Errorf("%w: pointer: %v", ErrCorrupt, err)
	}
	if head.Format > Format {
		return pointer{}, fmt.Errorf("%w: pointer has format %d, this binary knows up to %d", ErrFormat, head.Format, Format)
	}
	var p pointer
	if err := json.Unmarshal(v, &p); err != nil {
		return pointer{}, fmt.Errorf("%w: pointer: %v", ErrCorrupt, err)
	}
	if p.Version <= 0 || p.Chunks < 0 || p.Jobs < 0 {
		return pointer{}, fmt.Errorf("%w: pointer %+v", ErrCorrupt, p)
	}
	return p, nil
}

// encoded is a job set ready to be written: its compressed chunks and the
// pointer fields that describe them.
type encoded struct {
	chunks [][]byte
	digest string
	bytes  int64
}

// encodeSet splits jobs into chunks of at most chunkBytes of JSON each
// (before compression), so that a chunk fits one etcd request whatever it
// compresses to.
func encodeSet(jobs []config.Job, chunkBytes int) (encoded, error) {
	var (
		out  encoded
		sum  = sha256.New()
		buf  bytes.Buffer
		n    int
		head = []byte(fmt.Sprintf(`{"format":%d,"jobs":[`, Format))
		tail = []byte(`]}`)
	)
	flush := func() error {
		if n == 0 {
			return nil
		}
		buf.Write(tail)
		sum.Write(buf.Bytes())
		z, err := compress(buf.Bytes())
		if err != nil {
			return err
		}
		out.chunks = append(out.chunks, z)
		out.bytes += int64(len(z))
		buf.Reset()
		n = 0
		return nil
	}
	for i := range jobs {
		b, err := json.Marshal(&jobs[i])
		if err != nil {
			return encoded{}, fmt.Errorf("jobstore: encode job %q: %w", jobs[i].Name, err)
		}
		if len(head)+len(b)+len(tail) > chunkBytes {
			return encoded{}, fmt.Errorf("%w: job %q encodes to %d bytes, the limit is %d", ErrTooLarge, jobs[i].Name, len(b), chunkBytes-len(head)-len(tail))
		}
		if n > 0 && buf.Len()+1+len(b)+len(tail) > chunkBytes {
			if err := flush(); err != nil {
				return encoded{}, err
			}
		}
		if n == 0 {
			buf.Write(head)
		} else {
			buf.WriteByte(',')
		}
		buf.Write(b)
		n++
	}
	if err := flush(); err != nil {
		return encoded{}, err
	}
	out.digest = digestString(sum)
	return out, nil
}

func digestString(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func compress(b []byte) ([]byte, error) {
	var z bytes.Buffer
	w, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// chunkReader decodes a version's chunks in order and checks them against
// the pointer when done.
type chunkReader struct {
	p    pointer
	sum  hash.Hash
	next int
	jobs []config.Job
}

func newChunkReader(p pointer) *chunkReader {
	return &chunkReader{p: p, sum: sha256.New(), jobs: make([]config.Job, 0, p.Jobs)}
}

func (r *chunkReader) add(index int, v []byte) error {
	if index != r.next {
		return fmt.Errorf("%w: version %d: chunk %d missing", ErrCorrupt, r.p.Version, r.next)
	}
	r.next++
	zr, err := gzip.NewReader(bytes.NewReader(v))
	if err != nil {
		return fmt.Errorf("%w: version %d chunk %d: %v", ErrCorrupt, r.p.Version, index, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxChunkDecoded+1))
	if err == nil && len(raw) > maxChunkDecoded {
		err = errors.New("decompressed chunk too large")
	}
	if err != nil {
		return fmt.Errorf("%w: version %d chunk %d: %v", ErrCorrupt, r.p.Version, index, err)
	}
	// One pass decodes the format and the jobs; the format is checked
	// first, and a chunk that does not decode is told apart as newer
	// (ErrFormat) or damaged (ErrCorrupt).
	var c struct {
		Format int          `json:"format"`
		Jobs   []config.Job `json:"jobs"`
	}
	err = json.Unmarshal(raw, &c)
	if c.Format == 0 && err != nil {
		var head struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(raw, &head) == nil {
			c.Format = head.Format
		}
	}
	if c.Format > Format {
		return fmt.Errorf("%w: version %d chunk %d has format %d, this binary knows up to %d", ErrFormat, r.p.Version, index, c.Format, Format)
	}
	if err != nil {
		return fmt.Errorf("%w: version %d chunk %d: %v", ErrCorrupt, r.p.Version, index, err)
	}
	r.sum.Write(raw)
	r.jobs = append(r.jobs, c.Jobs...)
	return nil
}

func (r *chunkReader) finish() (config.JobSet, error) {
	if r.next != r.p.Chunks {
		return config.JobSet{}, fmt.Errorf("%w: version %d: %d of %d chunks found", ErrCorrupt, r.p.Version, r.next, r.p.Chunks)
	}
	if len(r.jobs) != r.p.Jobs {
		return config.JobSet{}, fmt.Errorf("%w: version %d: %d jobs, pointer says %d", ErrCorrupt, r.p.Version, len(r.jobs), r.p.Jobs)
	}
	if d := digestString(r.sum); d != r.p.Digest {
		return config.JobSet{}, fmt.Errorf("%w: version %d: digest %s, pointer says %s", ErrCorrupt, r.p.Version, d, r.p.Digest)
	}
	return config.JobSet{Version: r.p.Version, Jobs: r.jobs}, nil
}
