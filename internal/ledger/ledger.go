// Package ledger keeps a fencing-aware receiver's books: every run it
// received, judged by package receiver's two rules (a token lower than the
// highest seen for its shard is rejected; a repeat of a key is dropped),
// and counted, so a test or benchmark can tell how many repeats and stale
// tokens shardcron sent. The dev sink (cmd/shardcron), the end-to-end
// suite's ledger container and the cluster benchmark's sink all keep their
// books with it, so the three judge runs by one rule.
package ledger

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/shardcron/shardcron/receiver"
)

// Fire is one run as the receiver saw it.
type Fire struct {
	Cluster  string    `json:"cluster,omitempty"`
	Job      string    `json:"job"`
	Item     string    `json:"item,omitempty"` // a sharded job's item's name; "" for a job without items
	Tick     time.Time `json:"tick"`
	Shard    int       `json:"shard"`
	Token    int64     `json:"token"`
	Node     string    `json:"node"`
	Rerun    bool      `json:"rerun"`
	At       time.Time `json:"at"`       // receipt
	Accepted bool      `json:"accepted"` // false: a stale token, rejected
	Dup      bool      `json:"dup"`      // a repeat of a (job, item, tick) with a current token
}

// ErrIdentity is a request without a run's identity headers.
var ErrIdentity = receiver.ErrIdentity

// Parse reads a run's identity from its Shardcron-* headers (docs/semantics.md,
// "What a run carries"); at is the receipt.
func Parse(h http.Header, at time.Time) (Fire, error) {
	d, err := receiver.ParseHeader(h)
	if err != nil {
		return Fire{}, err
	}
	return fireOf(d, at), nil
}

func fireOf(d receiver.Delivery, at time.Time) Fire {
	return Fire{Cluster: d.Cluster, Job: d.Job, Item: d.Item, Tick: d.Tick, Shard: d.Shard, Token: d.Token, Node: d.Node, Rerun: d.Rerun, At: at}
}

// Delivery is f's identity, as package receiver judges it.
func (f Fire) Delivery() receiver.Delivery {
	return receiver.Delivery{Cluster: f.Cluster, Job: f.Job, Item: f.Item, Tick: f.Tick, Shard: f.Shard, Token: f.Token, Node: f.Node, Rerun: f.Rerun}
}

type key struct {
	job, item string
	tick      int64 // Unix nanoseconds: a manual tick is not a whole second
}

// Seen is what the ledger accepted of one (job, item, tick).
type Seen struct {
	N     int       // accepted runs
	First time.Time // receipt of the first
}

// retention is how long the ledger's store remembers a key: longer than
// any suite or benchmark, so every repeat is seen as one.
const retention = 7 * 24 * time.Hour

// Ledger is the receiver's record of every run. The zero value is not
// usable; use New.
type Ledger struct {
	store *receiver.Memory // judges every run
	mu    sync.Mutex
	seen  map[key]Seen
	fires []Fire // in order of receipt, rejected ones too
	stale int
}

func New() *Ledger {
	m, _ := receiver.NewMemory(receiver.MemoryConfig{Retention: retention}) // valid: constant
	return &Ledger{store: m, seen: map[key]Seen{}}
}

// Store is the state the ledger judges runs by: give it to
// receiver.Middleware, with Observe as its observer.
func (l *Ledger) Store() receiver.Store { return l.store }

// Record judges f in the ledger's store and enters it. The record is the
// run's effect, so an accepted run is completed at once.
func (l *Ledger) Record(f Fire) Fire {
	d := f.Delivery()
	dec, _ := l.store.Admit(context.Background(), d) // Memory never fails
	if dec.Verdict == receiver.Accept {
		_ = l.store.Complete(context.Background(), d.Key(), http.StatusOK)
	}
	return l.Enter(f, dec.Verdict)
}

// Observe enters a run receiver.Middleware judged, received now: a
// receiver.WithObserver function.
func (l *Ledger) Observe(_ *http.Request, t receiver.Ticket) {
	l.Enter(fireOf(t.Delivery, time.Now()), t.Verdict)
}

// Enter records f as judged by v and returns it with Accepted and Dup
// decided: a stale token is not accepted; a repeat or a delivery while its
// key's first is pending is an accepted duplicate.
func (l *Ledger) Enter(f Fire, v receiver.Verdict) Fire {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.Accepted = v != receiver.Stale
	if f.Accepted {
		k := key{f.Job, f.Item, f.Tick.UnixNano()}
		s := l.seen[k]
		f.Dup = v != receiver.Accept
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

// Seen returns what was accepted of job's tick, for a job without items.
func (l *Ledger) Seen(job string, tick time.Time) Seen { return l.SeenItem(job, "", tick) }

// SeenItem returns what was accepted of the tick of job's item (its name).
func (l *Ledger) SeenItem(job, item string, tick time.Time) Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[key{job, item, tick.UnixNano()}]
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
