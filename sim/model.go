package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// The model of the fenced store: what etcd holds for shardcron, and the
// transactions the shard and lease packages send, with their comparisons.
// Only the sim's goroutine touches it.

// maxTxnOps is etcd's --max-txn-ops, which the shard package's Store
// batches against (shard.MaxTxnOps).
const maxTxnOps = 128

type recKey struct {
	shard int
	job   string
}

type trigKey struct {
	shard   int
	job, id string
}

// shardKey is own/shards/<s>: its CreateRevision is the generation.
type shardKey struct {
	node  string
	lease int64
	gen   int64
}

// trigReq is a trigger request key.
type trigReq struct {
	rev int64 // CreateRevision
	at  time.Time
	by  string
}

// mLease is a node's etcd lease; it expires on the store's clock.
type mLease struct {
	node   string
	expiry time.Time
}

type model struct {
	rev     int64
	shards  map[int]shardKey
	markers map[int]scheduler.Released // ticks/<s>/_released
	recs    map[recKey]scheduler.Stored
	hist    map[recKey][]scheduler.Entry
	// replaced holds, by job, the ticks an owner recorded as replaced by a
	// newer tick before they started: decided by the replace policy, not
	// lost. A write its fence refused counts too: an owner that decides and
	// then loses the shard before its history lands (history is written
	// after the decision, in batches) still decided.
	replaced map[string]map[time.Time]bool
	// skippedTriggers holds the trigger ids an owner recorded as skipped
	// after their claim (replaced before they started, their job suspended
	// while the claim was on the way, their starting deadline passed
	// before a successor could start them): in history that landed, or in
	// a record write that took the flight out and raised the skipped count
	// (noteSkipped).
	skippedTriggers map[string]bool
	// skippedTo holds, by job, the stretches (after, through] its last
	// claimed tick moved across in a landed write that raised the skipped
	// count: ticks in them that did not run were recorded as skipped.
	skippedTo map[string][][2]time.Time
	trigs     map[trigKey]trigReq
	// consumed says how each consumed trigger request went: "claim" (its
	// manual tick is in flight in the record the write put) or "skip".
	consumed map[string]string
	leases   map[int64]*mLease
	// journals holds each session's journal values (journal/<node>/<lease>/<seq>).
	journals map[string][]scheduler.JournalLine
	ttl      time.Duration
	// note records what changed, for the checker's report.
	note func(node string, shard int, job, what string)
}

func newModel(ttl time.Duration, note func(node string, shard int, job, what string)) *model {
	return &model{shards: map[int]shardKey{}, markers: map[int]scheduler.Released{},
		recs: map[recKey]scheduler.Stored{}, hist: map[recKey][]scheduler.Entry{}, replaced: map[string]map[time.Time]bool{}, skippedTriggers: map[string]bool{}, skippedTo: map[string][][2]time.Time{}, trigs: map[trigKey]trigReq{},
		consumed: map[string]string{}, leases: map[int64]*mLease{}, journals: map[string][]scheduler.JournalLine{}, ttl: ttl, note: note}
}

// grantLease creates a lease for node.
func (m *model) grantLease(node string, now time.Time) int64 {
	m.rev++
	id := m.rev
	m.leases[id] = &mLease{node: node, expiry: now.Add(m.ttl)}
	return id
}

// keepAlive renews a lease; false if it is gone.
func (m *model) keepAlive(id int64, now time.Time) bool {
	l := m.leases[id]
	if l == nil {
		return false
	}
	l.expiry = now.Add(m.ttl)
	return true
}

// nextExpiry is the earliest lease expiry; zero if none.
func (m *model) nextExpiry() time.Time {
	var t time.Time
	for _, l := range m.leases {
		if t.IsZero() || l.expiry.Before(t) {
			t = l.expiry
		}
	}
	return t
}

// expire ends the leases whose time is up at now, with their shard keys.
func (m *model) expire(now time.Time) bool {
	var ids []int64
	for id, l := range m.leases {
		if !now.Before(l.expiry) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m.revoke(id, "lease expired")
	}
	return len(ids) > 0
}

// revoke deletes a lease and every key attached to it.
func (m *model) revoke(id int64, why string) {
	l := m.leases[id]
	if l == nil {
		return
	}
	delete(m.leases, id)
	m.rev++
	for _, s := range sortedKeys(m.shards) {
		if m.shards[s].lease == id {
			m.note(l.node, s, "", fmt.Sprintf("shard key gen %d deleted: %s", m.shards[s].gen, why))
			delete(m.shards, s)
		}
	}
}

func (m *model) fenceHolds(shard int, token int64) bool {
	k, ok := m.shards[shard]
	return ok && k.gen == token
}

// acquire is lease.Session.Acquire: create the shard key if absent,
// consuming its release marker in the same transaction.
func (m *model) acquire(shard int, node string, lease int64) (gen int64, marker *scheduler.Released, ok bool) {
	if _, held := m.shards[shard]; held || m.leases[lease] == nil {
		return 0, nil, false
	}
	m.rev++
	m.shards[shard] = shardKey{node: node, lease: lease, gen: m.rev}
	if mk, ok := m.markers[shard]; ok {
		marker = &mk
		delete(m.markers, shard)
	}
	m.note(node, shard, "", fmt.Sprintf("acquired gen %d, marker %s", m.rev, markerString(marker)))
	return m.rev, marker, true
}

func markerString(mk *scheduler.Released) string {
	if mk == nil {
		return "none"
	}
	var handed []string
	for _, job := range slices.Sorted(maps.Keys(mk.Handed)) {
		for _, t := range mk.Handed[job] {
			handed = append(handed, job+"/"+ts(t))
		}
	}
	return fmt.Sprintf("{stopped_at %s token %d handed %v}", ts(mk.StoppedAt), mk.Token, handed)
}

// release is lease.Session.Release: guarded by the generation, delete the
// shard key and put the marker.
func (m *model) release(node string, shard int, gen int64, mk scheduler.Released) bool {
	if !m.fenceHolds(shard, gen) {
		m.note(node, shard, "", fmt.Sprintf("release of gen %d refused: not held", gen))
		return false
	}
	m.rev++
	delete(m.shards, shard)
	m.markers[shard] = mk
	m.note(node, shard, "", fmt.Sprintf("released gen %d, marker %s", gen, markerString(&mk)))
	return true
}

// checkpoint is the shard's records, read in one ranged Get.
func (m *model) checkpoint(shard int) map[string]scheduler.Stored {
	out := map[string]scheduler.Stored{}
	for k, v := range m.recs {
		if k.shard == shard {
			out[k.job] = v
		}
	}
	return out
}

// cost is what a write takes of a transaction's comparisons.
func cost(w scheduler.Write) int { return 1 + len(w.Triggers) }

// commit is shard's Store.Commit: transactions of at most maxTxnOps
// comparisons; a failed one is classified (fence, record, requests) and
// the rest sent again. lost is told of every fence failure.
func (m *model) commit(node string, writes []scheduler.Write, lost func(shard int, token int64)) []scheduler.WriteResult {
	res := make([]scheduler.WriteResult, len(writes))
	pending := make([]int, len(writes))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		var batch, rest []int
		shards, keys, used := map[int]bool{}, map[recKey]bool{}, 0
		for _, i := range pending {
			w := writes[i]
			c := cost(w)
			if !shards[w.Shard] {
				c++
			}
			k := recKey{w.Shard, w.Job}
			if used+c > maxTxnOps || keys[k] {
				rest = append(rest, i)
				continue
			}
			used += c
			shards[w.Shard], keys[k] = true, true
			batch = append(batch, i)
		}
		if len(batch) == 0 {
			// One write larger than a transaction: etcd refuses it
			// (too many operations), an RPC error.
			for _, i := range rest {
				res[i].Err = fmt.Errorf("%w: shard %d job %s: %d comparisons exceed %d", scheduler.ErrUnknown,
					writes[i].Shard, writes[i].Job, cost(writes[i])+1, maxTxnOps)
				m.note(node, writes[i].Shard, writes[i].Job, "commit refused: too many operations")
			}
			return res
		}
		pending = append(m.txn(node, writes, batch, res, lost), rest...)
	}
	return res
}

func (m *model) txn(node string, writes []scheduler.Write, batch []int, res []scheduler.WriteResult, lost func(int, int64)) (retry []int) {
	ok := true
	for _, i := range batch {
		w := writes[i]
		if !m.fenceHolds(w.Shard, w.Token) || m.recs[recKey{w.Shard, w.Job}].Rev != w.Rev || len(m.gone(w)) > 0 {
			ok = false
		}
	}
	if ok {
		m.rev++
		for _, i := range batch {
			m.apply(node, writes[i])
			if writes[i].Value != nil {
				res[i].Rev = m.rev
			}
		}
		return nil
	}
	lostShard := map[int]bool{}
	for _, i := range batch {
		w := writes[i]
		switch {
		case !m.fenceHolds(w.Shard, w.Token):
			res[i].Err = fmt.Errorf("%w: shard %d token %d: the fence failed", scheduler.ErrShardLost, w.Shard, w.Token)
			if !lostShard[w.Shard] {
				lostShard[w.Shard] = true
				lost(w.Shard, w.Token)
			}
		case m.recs[recKey{w.Shard, w.Job}].Rev != w.Rev:
			res[i].Err = fmt.Errorf("%w: shard %d job %s: revision %d, expected %d", scheduler.ErrStale,
				w.Shard, w.Job, m.recs[recKey{w.Shard, w.Job}].Rev, w.Rev)
		case len(m.gone(w)) > 0:
			res[i].Err = &scheduler.TriggerGone{IDs: m.gone(w)}
		default:
			retry = append(retry, i)
			continue
		}
		m.note(node, w.Shard, w.Job, fmt.Sprintf("write refused: %v", res[i].Err))
	}
	return retry
}

// gone lists the requests w consumes that no longer exist with their Rev.
func (m *model) gone(w scheduler.Write) []string {
	var ids []string
	for _, t := range w.Triggers {
		if r, ok := m.trigs[trigKey{w.Shard, w.Job, t.ID}]; !ok || r.rev != t.Rev {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// apply lands one write at the current revision.
func (m *model) apply(node string, w scheduler.Write) {
	k := recKey{w.Shard, w.Job}
	m.noteSkipped(k, w)
	var r scheduler.Record
	if w.Value == nil {
		delete(m.recs, k)
	} else {
		m.recs[k] = scheduler.Stored{Value: w.Value, Rev: m.rev}
		r, _ = scheduler.DecodeRecord(w.Value)
	}
	for _, t := range w.Triggers {
		delete(m.trigs, trigKey{w.Shard, w.Job, t.ID})
		how := "skip"
		if slices.ContainsFunc(r.InFlight, func(f scheduler.Flight) bool { return f.Trigger == t.ID }) {
			how = "claim"
		}
		m.consumed[t.ID] = how
	}
	m.note(node, w.Shard, w.Job, fmt.Sprintf("rev %d token %d: %s", m.rev, w.Token, recordString(w.Value, r)))
}

func recordString(v []byte, r scheduler.Record) string {
	if v == nil {
		return "deleted"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "last_claimed %s in_flight [", ts(r.LastClaimed))
	for i, f := range r.InFlight {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s/%d", ts(f.Tick), f.Token)
		if f.Rerun {
			b.WriteString("/rerun")
		}
		if f.Trigger != "" {
			b.WriteString("/" + f.Trigger)
		}
	}
	fmt.Fprintf(&b, "] skipped %d", r.Skipped)
	return b.String()
}

// load is shard's Loader.Load.
func (m *model) load(shard int, token int64, job string) (scheduler.Stored, error) {
	if !m.fenceHolds(shard, token) {
		return scheduler.Stored{}, fmt.Errorf("%w: shard %d token %d", scheduler.ErrShardLost, shard, token)
	}
	return m.recs[recKey{shard, job}], nil
}

// trigger puts a trigger request.
func (m *model) trigger(shard int, job, id string, at time.Time) {
	m.rev++
	m.trigs[trigKey{shard, job, id}] = trigReq{rev: m.rev, at: at, by: "nemesis"}
	m.note("", shard, job, fmt.Sprintf("trigger request %s at rev %d", id, m.rev))
}

// triggersOf lists the requests of a shard, sorted.
func (m *model) triggersOf(shard int, token int64) []scheduler.Trigger {
	var out []scheduler.Trigger
	for k, r := range m.trigs {
		if k.shard == shard {
			out = append(out, scheduler.Trigger{Shard: shard, Token: token, Job: k.job, ID: k.id, RequestedAt: r.at, By: r.by, Rev: r.rev})
		}
	}
	slices.SortFunc(out, func(a, b scheduler.Trigger) int { return strings.Compare(a.ID, b.ID) })
	return out
}
