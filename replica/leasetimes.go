package replica

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/shard"
)

// leaseTimes tells the dashboard how long each member's lease has left in
// etcd (TimeToLive): the member list's "lease left". It asks etcd at most
// once a second, whatever the number of viewers, and waits at most
// leaseTimesWait for it; an answer that does not come leaves the field out.
type leaseTimes struct {
	cli *clientv3.Client

	mu   sync.Mutex
	at   time.Time
	left map[int64]time.Duration // by lease id
}

const (
	leaseTimesEvery = time.Second
	leaseTimesWait  = 300 * time.Millisecond
)

// fill sets LeaseRemainingMs of st's members.
func (l *leaseTimes) fill(st *shard.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.at) >= leaseTimesEvery {
		l.refresh(st.Members)
	}
	for i, m := range st.Members {
		if d, ok := l.left[m.Lease]; ok && m.Lease != 0 {
			ms := d.Milliseconds()
			st.Members[i].LeaseRemainingMs = &ms
		}
	}
}

func (l *leaseTimes) refresh(members []shard.MemberState) {
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimesWait)
	defer cancel()
	left := make(map[int64]time.Duration, len(members))
	for _, m := range members {
		if m.Lease == 0 {
			continue
		}
		resp, err := l.cli.TimeToLive(ctx, clientv3.LeaseID(m.Lease))
		if err != nil {
			break // etcd slow or away: show what is known, ask again later
		}
		if resp.TTL >= 0 {
			left[m.Lease] = time.Duration(resp.TTL) * time.Second
		}
	}
	l.at, l.left = time.Now(), left
}
