package history

import "sync"

// histCache is the Writer's knowledge of the segments of the jobs it wrote
// history for. Its mutex also serialises AppendHistory calls, so two calls
// never race on one job's segments.
type histCache struct {
	mu     sync.Mutex
	shards map[int]*shardHist
}

type shardHist struct {
	token int64
	jobs  map[string][]histSeg // oldest first
}

// histSeg is one stored segment: 16 bytes, so tracking costs little per job.
type histSeg struct {
	seq int64
	n   int64
}

// forgetUnheld drops what the cache knows of shards this node no longer
// holds under the token it was learnt under. Called with h.mu held.
func (h *histCache) forgetUnheld(f Fence) {
	for s, sh := range h.shards {
		if !f.Holds(s, sh.token) {
			delete(h.shards, s)
		}
	}
}

// jobSegs returns the tracked segments of job and whether they are known.
func (h *histCache) jobSegs(shard int, token int64, job string) ([]histSeg, bool) {
	sh := h.shards[shard]
	if sh == nil || sh.token != token {
		return nil, false
	}
	segs, ok := sh.jobs[job]
	return segs, ok
}

func (h *histCache) setJob(shard int, token int64, job string, segs []histSeg) {
	if h.shards == nil {
		h.shards = map[int]*shardHist{}
	}
	sh := h.shards[shard]
	if sh == nil || sh.token != token {
		sh = &shardHist{token: token, jobs: map[string][]histSeg{}}
		h.shards[shard] = sh
	}
	sh.jobs[job] = segs
}

func (h *histCache) forgetJob(shard int, job string) {
	if sh := h.shards[shard]; sh != nil {
		delete(sh.jobs, job)
	}
}
