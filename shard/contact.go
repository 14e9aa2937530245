package shard

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ContactProbe is how often the Manager asks etcd something cheap (a
// linearizable count of the meta key) so that its contact with etcd
// (lease.Contact, which every fenced write and history write also
// refreshes) stays fresh between fires. With a beat every 50 ms the
// contact age of a healthy node stays under 75 ms plus one round trip, well
// inside the scheduler's contact window (scheduler.DefaultContactWindow),
// and a node cut off from etcd sees its age pass the window within it.
const ContactProbe = 50 * time.Millisecond

// probeContact keeps the Manager's contact fresh until ctx ends. A beat
// at which an answer to a request sent within the last half beat is
// already in (a busy owner's writes answer many times a beat) sends
// nothing: a linearizable read costs etcd a round of heartbeats, and at
// thousands of fires a second the probes were a twentieth of a replica's
// CPU. A healthy node's contact age then stays under 75 ms plus a round
// trip.
func (m *Manager) probeContact(ctx context.Context) {
	t := time.NewTicker(ContactProbe)
	defer t.Stop()
	for {
		if m.contact.ContactAge() >= ContactProbe/2 {
			m.probeOnce(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probeOnce asks etcd for a linearizable count of the meta key and records
// the answer as contact.
func (m *Manager) probeOnce(ctx context.Context) {
	sent := m.contact.Begin()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := m.cli.Get(pctx, m.ks.Meta(), clientv3.WithCountOnly()); err == nil {
		m.contact.Answered(sent)
	}
}
