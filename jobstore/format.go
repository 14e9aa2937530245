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
	"slices"
	"sync"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Format is the newest job set encoding this binary reads and writes.
// Format 1 stores a version as one run of chunks; format 2 stores it as a
// part per shard, copy-on-write (parts.go); format 3 names those parts
// through pages, copy-on-write too (pages.go). Apply writes format 2 or 3
// only when told the cluster's shard count (ApplyOptions.Shards) and the
// format (ApplyOptions.Format), which its caller gives only when every
// member reads that format: a replica of an earlier release refuses a
// newer pointer (ErrFormat) and keeps its last set.
const Format = 3

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
	// Shards and Parts (format 2): the cluster's shard count the jobs were
	// grouped by, and the part of each shard that has jobs, in shard order.
	Shards int       `json:"shards,omitempty"`
	Parts  []partRef `json:"parts,omitempty"`
	// PageShards and Pages (format 3): the shards a page covers, and the
	// pages that name a part, in page order. Parts is not stored then: it
	// is filled in from the pages (readPages).
	PageShards int       `json:"page_shards,omitempty"`
	Pages      []pageRef `json:"pages,omitempty"`

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
	check := p.checkParts
	if p.Format >= 3 {
		check = p.checkPages
	} else if len(p.Pages) != 0 || p.PageShards != 0 {
		return pointer{}, fmt.Errorf("%w: format %d pointer with pages", ErrCorrupt, p.Format)
	}
	if err := check(); err != nil {
		return pointer{}, fmt.Errorf("%w: pointer: %v", ErrCorrupt, err)
	}
	return p, nil
}

// encode is the stored value of p: a format 3 pointer keeps its parts in
// its pages.
func (p pointer) encode() ([]byte, error) {
	if p.Format >= 3 {
		p.Parts = nil
	}
	return json.Marshal(p)
}

// encoded is a job set ready to be written: its compressed chunks and the
// pointer fields that describe them.
type encoded struct {
	raw    [][]byte // uncompressed, until compress (never, when eager)
	chunks [][]byte
	digest string // digestString of the uncompressed chunks
	short  string // partDigest of the same
	bytes  int64
}

// encodeSet splits jobs into chunks of at most chunkBytes of JSON each
// (before compression), so that a chunk fits one etcd request whatever it
// compresses to. Each chunk says format; a format 1 set says 1, so that a
// replica of an earlier release reads it. The chunks stay uncompressed
// until compress: a part whose digest shows it unchanged never is.
func encodeSet(jobs []config.Job, chunkBytes, format int) (encoded, error) {
	return encodeJobs(len(jobs), func(i int) *config.Job { return &jobs[i] }, chunkBytes, format, false)
}

// encodeJobs is encodeSet of the n jobs at gives, in that order, without a
// slice of them. With eager it compresses each chunk as soon as it is full
// and keeps none uncompressed: a format 1 set is written whole anyway, and
// a million jobs are hundreds of megabytes of JSON.
func encodeJobs(n int, at func(int) *config.Job, chunkBytes, format int, eager bool) (encoded, error) {
	var (
		out   encoded
		sum   = sha256.New()
		buf   bytes.Buffer
		inBuf int
		head  = []byte(fmt.Sprintf(`{"format":%d,"jobs":[`, format))
		tail  = []byte(`]}`)
	)
	flush := func() error {
		if inBuf == 0 {
			return nil
		}
		buf.Write(tail)
		sum.Write(buf.Bytes())
		if eager {
			z, err := compress(buf.Bytes())
			if err != nil {
				return err
			}
			out.chunks = append(out.chunks, z)
			out.bytes += int64(len(z))
		} else {
			out.raw = append(out.raw, bytes.Clone(buf.Bytes()))
		}
		buf.Reset()
		inBuf = 0
		return nil
	}
	for i := range n {
		j := at(i)
		b, err := json.Marshal(j)
		if err != nil {
			return encoded{}, fmt.Errorf("jobstore: encode job %q: %w", j.Name, err)
		}
		if len(head)+len(b)+len(tail) > chunkBytes {
			return encoded{}, fmt.Errorf("%w: job %q encodes to %d bytes, the limit is %d", ErrTooLarge, j.Name, len(b), chunkBytes-len(head)-len(tail))
		}
		if inBuf > 0 && buf.Len()+1+len(b)+len(tail) > chunkBytes {
			if err := flush(); err != nil {
				return encoded{}, err
			}
		}
		if inBuf == 0 {
			buf.Write(head)
		} else {
			buf.WriteByte(',')
		}
		buf.Write(b)
		inBuf++
	}
	if err := flush(); err != nil {
		return encoded{}, err
	}
	out.digest, out.short = digestString(sum), partDigest(sum)
	return out, nil
}

// compress compresses the chunks encodeSet made.
func (e *encoded) compress() error {
	for _, r := range e.raw {
		z, err := compress(r)
		if err != nil {
			return err
		}
		e.chunks = append(e.chunks, z)
		e.bytes += int64(len(z))
	}
	e.raw = nil
	return nil
}

func digestString(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// gzipWriters keeps compressors from one chunk to the next: a new one
// allocates its tables (most of a megabyte), and an apply of a format 2
// set may write a part for each of thousands of shards.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: never fails
	return w
}}

func compress(b []byte) ([]byte, error) {
	var z bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&z)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// chunkReader decodes a version's chunks (or a part's) in order and checks
// them against the pointer (or the part's ref) when done.
type chunkReader struct {
	p     pointer
	part  *partRef // nil: a format 1 version
	sum   hash.Hash
	next  int
	jobs  []config.Job
	share *sharer // what the jobs it decodes hold alike, held once (share.go)
	// names decodes only what an index needs of each job (its name and
	// items) unless a chunk holds a sharded job, which is then decoded
	// whole: every replica holds those. The digest still covers every byte.
	names bool
}

func newChunkReader(p pointer) *chunkReader {
	return &chunkReader{p: p, sum: sha256.New(), jobs: make([]config.Job, 0, p.Jobs), share: newSharer()}
}

// newPartReader reads the part r names; the messages name the part.
func newPartReader(r partRef) *chunkReader {
	c := newChunkReader(pointer{Version: r.Version, Chunks: r.Chunks, Jobs: r.Jobs, Digest: r.Digest})
	c.part = &r
	return c
}

// what names what is read, for messages.
func (r *chunkReader) what() string {
	if r.part != nil {
		return fmt.Sprintf("version %d part of shard %d", r.part.Version, r.part.Shard)
	}
	return fmt.Sprintf("version %d", r.p.Version)
}

func (r *chunkReader) add(index int, v []byte) error {
	if index != r.next {
		return fmt.Errorf("%w: %s: chunk %d missing", ErrCorrupt, r.what(), r.next)
	}
	r.next++
	d := inflaters.Get().(*inflater)
	defer d.release()
	raw, err := d.inflate(v)
	if err != nil {
		return fmt.Errorf("%w: %s chunk %d: %v", ErrCorrupt, r.what(), index, err)
	}
	// One pass decodes the format and the jobs; the format is checked
	// first, and a chunk that does not decode is told apart as newer
	// (ErrFormat) or damaged (ErrCorrupt).
	format, jobs, err := r.decode(raw)
	if format > Format {
		return fmt.Errorf("%w: %s chunk %d has format %d, this binary knows up to %d", ErrFormat, r.what(), index, format, Format)
	}
	if err != nil {
		return fmt.Errorf("%w: %s chunk %d: %v", ErrCorrupt, r.what(), index, err)
	}
	r.sum.Write(raw)
	r.jobs = append(r.jobs, jobs...)
	return nil
}

// inflater decompresses chunks into a buffer it keeps, so that reading
// a set's thousand parts grows no buffer a thousand times; what a chunk
// decodes to copies what it keeps (encoding/json), so the buffer is free
// again once the chunk is decoded.
type inflater struct {
	zr  *gzip.Reader
	buf bytes.Buffer
}

var inflaters = sync.Pool{New: func() any { return new(inflater) }}

// release returns d to the pool, without a buffer grown by an outsized
// chunk.
func (d *inflater) release() {
	if d.buf.Cap() > 4<<20 {
		d.buf = bytes.Buffer{}
	}
	inflaters.Put(d)
}

// inflate returns v decompressed, valid until the next inflate.
func (d *inflater) inflate(v []byte) ([]byte, error) {
	var err error
	if d.zr == nil {
		d.zr, err = gzip.NewReader(bytes.NewReader(v))
	} else {
		err = d.zr.Reset(bytes.NewReader(v))
	}
	if err != nil {
		return nil, err
	}
	d.buf.Reset()
	if _, err := d.buf.ReadFrom(io.LimitReader(d.zr, maxChunkDecoded+1)); err != nil {
		return nil, err
	}
	if d.buf.Len() > maxChunkDecoded {
		return nil, errors.New("decompressed chunk too large")
	}
	return d.buf.Bytes(), nil
}

// nameOnly is what an index needs of a job it does not hold.
type nameOnly struct {
	Name      string   `json:"name"`
	Items     int      `json:"items"`
	ItemNames []string `json:"item_names"`
}

func (j nameOnly) sharded() bool { return j.Items > 0 || len(j.ItemNames) > 0 }

// decode decodes one chunk's format and jobs: whole, shared (share.go),
// or, with r.names and no sharded job in it, only their names.
func (r *chunkReader) decode(raw []byte) (int, []config.Job, error) {
	if r.names {
		var c struct {
			Format int        `json:"format"`
			Jobs   []nameOnly `json:"jobs"`
		}
		err := json.Unmarshal(raw, &c)
		if err == nil && c.Format <= Format && !slices.ContainsFunc(c.Jobs, nameOnly.sharded) {
			jobs := make([]config.Job, len(c.Jobs))
			for i, j := range c.Jobs {
				jobs[i].Name = j.Name
			}
			return c.Format, jobs, nil
		}
	}
	var c struct {
		Format int          `json:"format"`
		Jobs   []config.Job `json:"jobs"`
	}
	err := json.Unmarshal(raw, &c)
	if c.Format == 0 && err != nil {
		var head struct {
			Format int `json:"format"`
		}
		if json.Unmarshal(raw, &head) == nil {
			c.Format = head.Format
		}
	}
	if err == nil {
		for i := range c.Jobs {
			r.share.share(&c.Jobs[i])
		}
	}
	return c.Format, c.Jobs, err
}

func (r *chunkReader) finish() (config.JobSet, error) {
	if r.next != r.p.Chunks {
		return config.JobSet{}, fmt.Errorf("%w: %s: %d of %d chunks found", ErrCorrupt, r.what(), r.next, r.p.Chunks)
	}
	if len(r.jobs) != r.p.Jobs {
		return config.JobSet{}, fmt.Errorf("%w: %s: %d jobs, pointer says %d", ErrCorrupt, r.what(), len(r.jobs), r.p.Jobs)
	}
	d := digestString(r.sum)
	if r.part != nil {
		d = partDigest(r.sum)
	}
	if d != r.p.Digest {
		return config.JobSet{}, fmt.Errorf("%w: %s: digest %s, pointer says %s", ErrCorrupt, r.what(), d, r.p.Digest)
	}
	return config.JobSet{Version: r.p.Version, Jobs: r.jobs}, nil
}
