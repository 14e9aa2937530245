package jobstore

import (
	"testing"

	"github.com/shardcron/shardcron/config"
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
