package jobstore

import (
	"testing"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// FuzzDecodeChunk: the readers of stored job sets never panic on any
// pointer or chunk bytes (a damaged or foreign value): decodePointer and
// the chunk reader return a set or an error (ErrCorrupt or ErrFormat), and
// a set they return matches its pointer's job count. The kept corpus is
// testdata/fuzz/FuzzDecodeChunk; `make fuzz` explores for a bounded time.
func FuzzDecodeChunk(f *testing.F) {
	enc, err := encodeSet([]config.Job{{Name: "a", Schedule: "@every 1s"}, {Name: "b", Schedule: "* * * * *"}}, 1<<20, 1)
	if err == nil {
		err = enc.compress()
	}
	if err != nil {
		f.Fatal(err)
	}
	good := []byte(`{"format":1,"version":7,"chunks":1,"jobs":2,"digest":"` + enc.digest + `"}`)
	f.Add(good, enc.chunks[0])
	f.Add(good, []byte("not gzip"))
	f.Add([]byte(`{"format":2,"version":7}`), enc.chunks[0])
	f.Add([]byte(`{"format":3,"version":7,"chunks":1,"jobs":2,"shards":4,"page_shards":2,"pages":[{"p":1,"v":7,"n":1,"j":2,"d":"x"}]}`), enc.chunks[0])
	f.Add([]byte(`{"format":1,"version":-1}`), []byte{})
	f.Add([]byte(`{"format":1,"version":7,"chunks":0,"jobs":0,"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`), []byte{})
	f.Fuzz(func(t *testing.T, ptr, chunk []byte) {
		p, err := decodePointer(ptr)
		if err != nil {
			return
		}
		r := newChunkReader(pointer{Version: p.Version, Chunks: p.Chunks, Jobs: min(p.Jobs, 1000), Digest: p.Digest})
		if p.Chunks > 0 {
			if err := r.add(0, chunk); err != nil {
				return
			}
		}
		set, err := r.finish()
		if err != nil {
			return
		}
		if len(set.Jobs) != min(p.Jobs, 1000) || set.Version != p.Version {
			t.Fatalf("set of %d jobs, version %d, for pointer %+v", len(set.Jobs), set.Version, p)
		}
	})
}

// FuzzDecodePages: a format 3 pointer and its pages never make a reader
// panic: decodePointer, decodePage (given any page bytes, and those bytes
// under a matching digest, so the fuzzer reaches the decoding) and the
// check of the parts they name return parts or an error, and parts that
// pass match the pointer's counts. `make fuzz` explores for a bounded time.
func FuzzDecodePages(f *testing.F) {
	ks := keyspace.New("fuzz")
	parts := []partRef{{Shard: 1, Version: 5, Chunks: 1, Jobs: 2, Bytes: 90, Digest: "AAAAAAAAAAAAAAAAAAAAAA"}, {Shard: 6, Version: 7, Chunks: 2, Jobs: 3, Bytes: 99, Digest: "BBBBBBBBBBBBBBBBBBBBBB"}}
	p, writes, err := pagedPointer(ks, partsPointer(7, 8, parts), pointer{})
	if err != nil {
		f.Fatal(err)
	}
	ptr, err := p.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ptr, writes[0].val)
	f.Add(ptr, writes[1].val)
	f.Add(ptr, []byte(`{"format":3,"parts":[{"s":-1}]}`))
	f.Add([]byte(`{"format":3,"version":7,"shards":8,"page_shards":0}`), writes[0].val)
	f.Fuzz(func(t *testing.T, ptr, pg []byte) {
		p, err := decodePointer(ptr)
		if err != nil || p.Format < 3 {
			return
		}
		var all []partRef
		for i, r := range p.Pages {
			if i == 4 {
				return
			}
			if _, err := decodePage(p, r, pg); err == nil && bytesDigest(pg) != r.Digest {
				t.Fatalf("page %+v decoded under another digest", r)
			}
			r.Digest = bytesDigest(pg)
			got, err := decodePage(p, r, pg)
			if err != nil {
				return
			}
			all = append(all, got...)
		}
		p.Parts = all
		if p.checkParts() != nil {
			return
		}
		jobs := 0
		for _, r := range all {
			jobs += r.Jobs
		}
		if jobs != p.Jobs {
			t.Fatalf("parts of %d jobs passed for a pointer of %d", jobs, p.Jobs)
		}
	})
}
