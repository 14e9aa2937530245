package shard

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ContactProbe is how often the Manager asks etcd something cheap (a
// linearizable count of the meta key) so that its contact with etcd
// (lease.Contact, which every fenced write and history write also
// refreshes) is fresh when a run starts. With a beat every 50 ms the
// contact age of a healthy node stays under 75 ms plus one round trip, well
// inside the scheduler's contact window (scheduler.DefaultContactWindow),
// and a node cut off from etcd sees its age pass the window within it.
const ContactProbe = 50 * time.Millisecond

// probeContact keeps the Manager's contact fresh until ctx ends, while a
// run may start soon. A beat sends nothing when no run is expected within
// lease.ExpectReach (the scheduler says when its next may start, through
// Grant.Contact): an idle replica, or one between the seconds its jobs
// fire on, asks etcd nothing. Nor does a beat at which an answer to a
// request sent within the last half beat is already in (a busy owner's
// writes answer many times a beat): a linearizable read costs etcd a round
// of heartbeats, and at thousands of fires a second the probes were a
// twentieth of a replica's CPU. A run expected at T therefore finds an
// answer sent within the last 100 ms; one that starts unexpected (a manual
// trigger, a shard's catch-up) is held for a round trip (Contact.Soon
// wakes the probe at once).
func (m *Manager) probeContact(ctx context.Context) {
	t := time.NewTicker(ContactProbe)
	defer t.Stop()
	for {
		if m.contact.Wanted() && m.contact.ContactAge() >= ContactProbe/2 {
			m.probeOnce(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.contact.Soon():
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
