package shard

import "time"

// A replica that cannot reach etcd stops acting at its safe deadline but
// keeps serving what it last saw: its view of own/ (members and shard
// keys) stays as it was when etcd last answered. State says so: Stale while
// this node has no valid session (etcd unreachable or too slow to renew,
// or a new session not yet granted), AsOf when etcd last answered it (the
// grant or the last successful renewal of its latest session), and
// StaleForMs how long ago that was. While the session is valid the view
// follows the watch, and AsOf is the last renewal (at most TTL/3 old).

// freshness fills st's Stale, AsOf and StaleForMs; mu held.
func (m *Manager) freshness(st *State, now time.Time) {
	asOf := m.asOf
	if m.sess != nil {
		asOf = m.sess.Renewed()
		if m.sess.Valid() {
			st.AsOf = asOf.UTC()
			return
		}
	}
	st.Stale = true
	if !asOf.IsZero() {
		st.AsOf = asOf.UTC()
		st.StaleForMs = max(0, now.Sub(asOf).Milliseconds())
	}
}
