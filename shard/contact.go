package shard

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ContactProbe is how often the Manager asks etcd something cheap (a
// linearizable count of the meta key) so that its contact with etcd
// (lease.Contact, which every fenced write and history write also
// refreshes) stays fresh between fires. With a probe every 50 ms the
// contact age of a healthy node stays under 50 ms plus one round trip, well
// inside the scheduler's contact window (scheduler.DefaultContactWindow),
// and a node cut off from etcd sees its age pass the window within it.
const ContactProbe = 50 * time.Millisecond

// probeContact keeps the Manager's contact fresh until ctx ends.
func (m *Manager) probeContact(ctx context.Context) {
	t := time.NewTicker(ContactProbe)
	defer t.Stop()
	for {
		sent := m.contact.Begin()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := m.cli.Get(pctx, m.ks.Meta(), clientv3.WithCountOnly())
		cancel()
		if err == nil {
			m.contact.Answered(sent)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
