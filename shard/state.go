package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// State is a snapshot of ownership as this node sees it, served at
// /api/v1/state.
type State struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	// Shards is S.
	Shards  int           `json:"shard_count"`
	Session SessionState  `json:"session"`
	Members []MemberState `json:"members"`
	// Owned is how many shards this node holds; Unowned how many have no
	// owner in etcd.
	Owned   int `json:"owned"`
	Unowned int `json:"unowned"`
	// Ideal is S over the counted members; LoadBound the most shards the
	// assignment gives one member (the ring's load factor times Ideal,
	// rounded up).
	Ideal     float64      `json:"ideal"`
	LoadBound int          `json:"load_bound"`
	ShardSet  []ShardState `json:"shards"`
	// ChurnPerMin counts the shard acquisitions (anywhere in the cluster)
	// this node's watch saw in the last minute; ChurnBins the same per
	// minute over the last 15 minutes, oldest first, ending with that
	// minute. Counted on every change, not from a bounded list (churn.go).
	ChurnPerMin int   `json:"churn_per_min"`
	ChurnBins   []int `json:"churn_bins"`
	// Stale: this node has no valid session, so the view is what it saw
	// when etcd last answered (AsOf), StaleForMs ago (stale.go).
	Stale      bool      `json:"stale"`
	AsOf       time.Time `json:"as_of,omitzero"`
	StaleForMs int64     `json:"stale_for_ms,omitempty"`
}

// SessionState describes this node's lease session.
type SessionState struct {
	Valid       bool   `json:"valid"`
	LeaseID     string `json:"lease_id,omitempty"`
	RemainingMs int64  `json:"remaining_ms"`
}

// MemberState is one member key.
type MemberState struct {
	Node    string    `json:"node"`
	Address string    `json:"address,omitempty"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
	// JobSetFormat is the newest job set format the member reads (0: a
	// release that reads format 1 only).
	JobSetFormat int `json:"job_set_format,omitempty"`
	// Features lists the jobs file's features the member runs (absent:
	// a release before sharded jobs).
	Features []string `json:"features,omitempty"`
	// Counted: the member has settled and counts in the assignment (as
	// this node sees it); a drained member never counts.
	Counted bool `json:"counted"`
	// Drained: the member has a drain flag (shardcron drain): it hands
	// over its shards and takes none.
	Drained bool `json:"drained"`
	// Owns and Desired count the shards the member holds and the shards
	// the assignment gives it.
	Owns    int `json:"owns"`
	Desired int `json:"desired"`
	// Lease is the etcd lease the member key hangs off (0 when unknown);
	// LeaseRemainingMs how long etcd keeps it without a renewal, when the
	// caller looked it up (LeaseTimes).
	Lease            int64  `json:"-"`
	LeaseRemainingMs *int64 `json:"lease_remaining_ms,omitempty"`
}

// ShardState is one shard.
type ShardState struct {
	Shard int `json:"shard"`
	// Owner is the node holding the shard's lease; "" when free.
	Owner string `json:"owner"`
	// Token is the holder's generation (fencing token); 0 when free. Its
	// JSON carries it twice: as token, the name every other field of the
	// API and CLI uses, and as generation, the name docs/design.md gives it in
	// /api/v1/state, kept for clients that read it (MarshalJSON).
	Token int64 `json:"token"`
	// Since is when the holder acquired it.
	Since time.Time `json:"since,omitzero"`
	// Desired is the owner the assignment wants.
	Desired string `json:"desired"`
	// Mine: this node holds it under a token its own Acquire returned and
	// its Grant is live.
	Mine bool `json:"mine"`
}

// MarshalJSON writes the shard with its token also under "generation".
func (s ShardState) MarshalJSON() ([]byte, error) {
	type plain ShardState
	return json.Marshal(struct {
		plain
		Generation int64 `json:"generation"`
	}{plain(s), s.Token})
}

// State returns a snapshot of ownership as this node sees it.
func (m *Manager) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := State{Cluster: m.cfg.Cluster, Node: m.cfg.Node, Shards: m.meta.Shards, ShardSet: make([]ShardState, m.meta.Shards)}
	if m.sess != nil {
		st.Session = SessionState{Valid: m.sess.Valid(), LeaseID: fmt.Sprintf("%016x", int64(m.sess.LeaseID())),
			RemainingMs: max(0, m.sess.Remaining().Milliseconds())}
	}
	for n, mv := range m.v.members {
		drained := m.v.drained[n]
		st.Members = append(st.Members, MemberState{Node: n, Address: mv.info.Address, Started: mv.info.Started,
			Version: mv.info.Version, JobSetFormat: mv.info.JobSetFormat, Features: mv.info.Features, Counted: mv.counted && !drained, Drained: drained, Lease: mv.lease})
	}
	slices.SortFunc(st.Members, func(a, b MemberState) int { return strings.Compare(a.Node, b.Node) })
	for s := range st.ShardSet {
		ss := ShardState{Shard: s, Desired: m.assign.Owner(s)}
		if sv, ok := m.v.shards[s]; ok {
			ss.Owner, ss.Token, ss.Since = sv.owner.Node, sv.token, sv.owner.Acquired
			if sv.owner.Node == "" {
				st.Unowned++ // a key naming no owner (baddata.go)
			}
		} else {
			st.Unowned++
		}
		if h, ok := m.held[s]; ok && h.lost.Err() == nil {
			ss.Mine = true
			st.Owned++
			if ss.Token == 0 {
				// Acquired, not yet seen by the watch.
				ss.Owner, ss.Token, ss.Since = m.cfg.Node, h.tok.Generation, h.since
				st.Unowned--
			}
		}
		st.ShardSet[s] = ss
	}
	st.countByMember(m.params.LoadFactor)
	now := time.Now()
	st.ChurnPerMin, st.ChurnBins = m.feed.Churn(now)
	m.freshness(&st, now)
	return st
}

// countByMember fills each member's Owns and Desired, Ideal and LoadBound.
func (st *State) countByMember(loadFactor float64) {
	idx := make(map[string]int, len(st.Members))
	counted := 0
	for i, mb := range st.Members {
		idx[mb.Node] = i
		if mb.Counted {
			counted++
		}
	}
	for _, ss := range st.ShardSet {
		if i, ok := idx[ss.Owner]; ok {
			st.Members[i].Owns++
		}
		if i, ok := idx[ss.Desired]; ok {
			st.Members[i].Desired++
		}
	}
	if counted > 0 {
		st.Ideal = float64(st.Shards) / float64(counted)
		st.LoadBound = int(math.Ceil(st.Ideal * loadFactor))
	}
}

// publish updates the gauges that the snapshot feeds.
func (l *loop) publish() {
	l.m.mu.Lock()
	unowned := l.m.v.unowned(l.m.meta.Shards)
	l.m.mu.Unlock()
	l.m.met.unowned.Set(float64(unowned))
}

// How long a refused write keeps the node unready.
const writeErrorWindow = 30 * time.Second

// Ready reports whether this node can act: its session is valid, etcd has
// no NOSPACE alarm, and its recent writes did not fail (keepalives alone
// succeeding must never look healthy). Nil means ready.
func (m *Manager) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.sess == nil || !m.sess.Valid():
		return ErrNotReady
	case m.alarm:
		return fmt.Errorf("%w: etcd NOSPACE alarm raised", ErrNoSpace)
	case !m.noSpace.IsZero() && time.Since(m.noSpace) < writeErrorWindow:
		return fmt.Errorf("%w: a write was refused %v ago", ErrNoSpace, time.Since(m.noSpace).Round(time.Second))
	case m.wErr != nil && time.Since(m.wErrAt) < writeErrorWindow:
		return fmt.Errorf("shard: writes failing: %w: %w", scheduler.ErrUnknown, m.wErr)
	}
	return nil
}

// readCheckpoint reads every record of shard s and its lines of the
// completion journal, in one read-only transaction with the checkpoints of
// other shards asked for meanwhile (checkpoints).
func (m *Manager) readCheckpoint(ctx context.Context, s int) (scheduler.Checkpoint, error) {
	return m.cps.read(ctx, s)
}
