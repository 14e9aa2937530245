package receiver

import (
	"context"
	"errors"
	"time"
)

// Defaults of MemoryConfig and SQLConfig.
const (
	// DefaultRetention is how long a key is remembered. A re-run comes
	// after an owner change: seconds after its first run, or after an
	// outage plus the job's starting deadline.
	DefaultRetention = 24 * time.Hour
	// DefaultPending is how long an accepted key may stay without an
	// outcome before another delivery takes it over: longer than any
	// job's timeout.
	DefaultPending = 10 * time.Minute
)

// Errors. Store errors are wrapped with the run's key.
var (
	// ErrIdentity is a run without shardcron's identity (headers or
	// environment missing or malformed).
	ErrIdentity = errors.New("receiver: missing or malformed shardcron run identity")
	// ErrConfig is an invalid store configuration.
	ErrConfig = errors.New("receiver: invalid configuration")
)

// Delivery is one run as a receiver sees it: its identity.
type Delivery struct {
	Cluster string // may be empty when the receiver serves one cluster
	Job     string
	// Item is the name of a sharded job's item (Shardcron-Item-Name), ""
	// for a job without items: each item of a tick is a key of its own.
	Item  string
	Tick  time.Time // UTC; a manual run's tick is not a whole second
	Shard int
	Token int64 // the fencing token: compared within (Cluster, Shard)
	Node  string
	Rerun bool // shardcron marked it a possible re-run
}

// Key is the idempotency key of d.
func (d Delivery) Key() Key {
	return Key{Cluster: d.Cluster, Job: d.Job, Item: d.Item, Tick: d.Tick.UnixNano()}
}

// Key is a run's idempotency key. Tick is Unix nanoseconds, so keys compare
// with == whatever the tick's location. Item is "" for a job without items.
type Key struct {
	Cluster string
	Job     string
	Item    string
	Tick    int64
}

// unitSep joins a job and its item in Unit: ':' is in no job's name.
const unitSep = ":"

// Unit is the job's name, or "<job>:<item>" for an item of a sharded job,
// as shardcron names the item's unit: what the SQL store keeps in its job
// column, so that one key's row is one item's.
func (k Key) Unit() string {
	if k.Item == "" {
		return k.Job
	}
	return k.Job + unitSep + k.Item
}

// Verdict is what to do with a delivery.
type Verdict int

const (
	// Accept: the first delivery of its key with a current token. Apply
	// the effect, then Complete (it took place) or Forget (it did not).
	Accept Verdict = iota + 1
	// Repeat: the key's effect took place already. Drop the run and
	// answer success.
	Repeat
	// Pending: another delivery of the key was accepted and has no outcome
	// yet. Drop the run and answer "try later": the first may still fail.
	Pending
	// Stale: the token is lower than the highest seen for its shard.
	// Reject the run.
	Stale
)

func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Repeat:
		return "repeat"
	case Pending:
		return "pending"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Decision is Admit's answer.
type Decision struct {
	Verdict Verdict
	// Highest is the shard's highest token after the decision.
	Highest int64
	// Status is, for a Repeat, the outcome Complete recorded.
	Status int
}

// Store keeps a receiver's state: the highest token per (cluster, shard)
// and the keys applied. Every method is safe for concurrent use, by
// goroutines and, for SQL, by processes sharing the database.
type Store interface {
	// Admit applies both rules to d as one atomic step (package doc): it
	// compares d.Token with the highest seen for its shard, raises that,
	// and records d's key as pending when it is new.
	Admit(ctx context.Context, d Delivery) (Decision, error)
	// Complete records that the effect of an accepted key took place, with
	// status (an HTTP status; 200 for an exec job) replayed to repeats.
	Complete(ctx context.Context, k Key, status int) error
	// Forget drops an accepted key whose effect did not take place, so
	// that the next delivery of it is accepted. Complete and Forget change
	// only a pending key.
	Forget(ctx context.Context, k Key) error
}

// Ticket is an admitted delivery: what Exec returns, and what Middleware
// works with.
type Ticket struct {
	Delivery
	Decision
	store Store
}

// Admit admits d in s and returns the ticket to finish it with.
func Admit(ctx context.Context, s Store, d Delivery) (Ticket, error) {
	dec, err := s.Admit(ctx, d)
	return Ticket{Delivery: d, Decision: dec, store: s}, err
}

// Proceed reports whether the run should apply its effect.
func (t Ticket) Proceed() bool { return t.Verdict == Accept }

// Done finishes an accepted ticket: applied says whether the effect took
// place (Complete, status 200) or not (Forget). It does nothing for a
// ticket that was not accepted.
func (t Ticket) Done(ctx context.Context, applied bool) error {
	if !t.Proceed() {
		return nil
	}
	if applied {
		return t.store.Complete(ctx, t.Key(), 200)
	}
	return t.store.Forget(ctx, t.Key())
}
