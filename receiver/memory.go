package receiver

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryConfig configures a Memory store.
type MemoryConfig struct {
	// Retention is how long a key is remembered after it was accepted
	// (default DefaultRetention). Memory grows with the runs received in
	// a retention, about 200 bytes a key: 100 runs a second for a day is
	// some 2 GB. A shorter retention costs less memory and lets a repeat
	// that comes later than it through.
	Retention time.Duration
	// Pending is how long an accepted key may stay without an outcome
	// before another delivery takes it over (default DefaultPending).
	Pending time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate checks c.
func (c MemoryConfig) Validate() error {
	if c.Retention < 0 || c.Pending < 0 {
		return fmt.Errorf("%w: negative retention or pending", ErrConfig)
	}
	return nil
}

func (c *MemoryConfig) defaults() {
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Pending == 0 {
		c.Pending = DefaultPending
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

type fenceKey struct {
	cluster string
	shard   int
}

type memEntry struct {
	status int // 0 while pending
	at     time.Time
}

type memSeen struct {
	key Key
	at  time.Time
}

// Memory is a Store in process memory, bounded by its retention. One mutex
// guards it: Admit is atomic, and the state is lost with the process (see
// the package doc). The tokens of every shard are kept for its lifetime:
// one entry per (cluster, shard).
type Memory struct {
	cfg   MemoryConfig
	mu    sync.Mutex
	fence map[fenceKey]int64
	keys  map[Key]memEntry
	order []memSeen // keys in order of acceptance, for the sweep
}

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	return &Memory{cfg: cfg, fence: map[fenceKey]int64{}, keys: map[Key]memEntry{}}, nil
}

// Admit implements Store.
func (m *Memory) Admit(_ context.Context, d Delivery) (Decision, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	fk := fenceKey{d.Cluster, d.Shard}
	high, ok := m.fence[fk]
	if ok && d.Token < high {
		return Decision{Verdict: Stale, Highest: high}, nil
	}
	m.fence[fk] = d.Token
	dec := Decision{Highest: d.Token}
	k := d.Key()
	e, seen := m.keys[k]
	switch {
	case seen && e.status != 0:
		dec.Verdict, dec.Status = Repeat, e.status
	case seen && now.Sub(e.at) < m.cfg.Pending:
		dec.Verdict = Pending
	default: // new, or pending too long: its first delivery is presumed dead
		m.keys[k] = memEntry{at: now}
		m.order = append(m.order, memSeen{k, now})
		dec.Verdict = Accept
	}
	return dec, nil
}

// Complete implements Store.
func (m *Memory) Complete(_ context.Context, k Key, status int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.keys[k]; ok && e.status == 0 {
		e.status = status
		m.keys[k] = e
	}
	return nil
}

// Forget implements Store.
func (m *Memory) Forget(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.keys[k]; ok && e.status == 0 {
		delete(m.keys, k)
	}
	return nil
}

// Len returns the number of keys remembered.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.cfg.Now())
	return len(m.keys)
}

// sweep forgets the keys accepted a retention ago. Keys enter order as
// they are accepted, so it stops at the first younger one: amortized O(1)
// per Admit. An entry of order whose key was forgotten or accepted again
// since is skipped.
func (m *Memory) sweep(now time.Time) {
	cut := now.Add(-m.cfg.Retention)
	i := 0
	for ; i < len(m.order) && m.order[i].at.Before(cut); i++ {
		s := m.order[i]
		if e, ok := m.keys[s.key]; ok && e.at.Equal(s.at) {
			delete(m.keys, s.key)
		}
	}
	m.order = m.order[i:] // the next append that grows it drops the head
}
