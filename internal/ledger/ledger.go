// Package ledger keeps a fencing-aware receiver's books, as docs/design.md
// ("Delivery semantics") asks of a receiver: a run is accepted only if its
// fencing token is at least the highest accepted for its shard, and an
// accepted repeat of a (job, tick) is marked a duplicate rather than hidden.
// The dev sink (cmd/shardcron), the end-to-end suite's ledger container and
// the cluster benchmark's sink all keep their books with it, so the three
// judge runs by one rule.
package ledger

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fire is one run as the receiver saw it.
type Fire struct {
	Job      string    `json:"job"`
	Tick     time.Time `json:"tick"`
	Shard    int       `json:"shard"`
	Token    int64     `json:"token"`
	Node     string    `json:"node"`
	Rerun    bool      `json:"rerun"`
	At       time.Time `json:"at"`       // receipt
	Accepted bool      `json:"accepted"` // false: a stale token, rejected
	Dup      bool      `json:"dup"`      // an accepted repeat of a (job, tick)
}

// ErrIdentity is a request without a run's identity headers.
var ErrIdentity = errors.New("missing or malformed Shardcron-* identity headers")

// Parse reads a run's identity from its Shardcron-* headers (docs/semantics.md,
// "What a run carries"); at is the receipt.
func Parse(h http.Header, at time.Time) (Fire, error) {
	tick, err1 := time.Parse(time.RFC3339, h.Get("Shardcron-Tick"))
	shard, err2 := strconv.Atoi(h.Get("Shardcron-Shard"))
	token, err3 := strconv.ParseInt(h.Get("Shardcron-Fencing-Token"), 10, 64)
	job := h.Get("Shardcron-Job")
	if job == "" || err1 != nil || err2 != nil || err3 != nil {
		return Fire{}, ErrIdentity
	}
	return Fire{Job: job, Tick: tick.UTC(), Shard: shard, Token: token, Node: h.Get("Shardcron-Node"),
		Rerun: h.Get("Shardcron-Rerun") == "true", At: at}, nil
}

type key struct {
	job  string
	tick int64 // Unix nanoseconds: a manual tick is not a whole second
}

// Seen is what the ledger accepted of one (job, tick).
type Seen struct {
	N     int       // accepted runs
	First time.Time // receipt of the first
}

// Ledger is the receiver's record of every run. The zero value is not
// usable; use New.
type Ledger struct {
	mu      sync.Mutex
	highest map[int]int64 // shard -> highest token accepted
	seen    map[key]Seen
	fires   []Fire // in order of receipt, rejected ones too
	stale   int
}

func New() *Ledger {
	return &Ledger{highest: map[int]int64{}, seen: map[key]Seen{}}
}

// Record enters f and returns it with Accepted and Dup decided. The token
// comparison and the recording happen under one lock: the receiver's "one
// transaction".
func (l *Ledger) Record(f Fire) Fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.Accepted = f.Token >= l.highest[f.Shard]
	if f.Accepted {
		l.highest[f.Shard] = f.Token
		k := key{f.Job, f.Tick.UnixNano()}
		s := l.seen[k]
		f.Dup = s.N > 0
		if s.N == 0 {
			s.First = f.At
		}
		s.N++
		l.seen[k] = s
	} else {
		l.stale++
	}
	l.fires = append(l.fires, f)
	return f
}

// Seen returns what was accepted of job's tick.
func (l *Ledger) Seen(job string, tick time.Time) Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[key{job, tick.UnixNano()}]
}

// Stale counts the runs rejected for a stale token.
func (l *Ledger) Stale() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stale
}

// Fires returns a copy of every run received so far, in order of receipt.
func (l *Ledger) Fires() []Fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Fire(nil), l.fires...)
}

// Since returns a copy of the runs received at t or later. Runs enter in
// about the order of receipt, so it reads back from the newest until it
// meets an older one.
func (l *Ledger) Since(t time.Time) []Fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := len(l.fires)
	for i > 0 && !l.fires[i-1].At.Before(t) {
		i--
	}
	return append([]Fire(nil), l.fires[i:]...)
}
