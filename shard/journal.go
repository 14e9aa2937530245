package shard

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/lease"
	"github.com/shardcron/shardcron/scheduler"
)

// Journal returns the completion journal's writer for the scheduler
// (scheduler.Journal): values under journal/<node>/<lease>/, unfenced.
func (m *Manager) Journal() scheduler.Journal { return journal{m} }

type journal struct{ m *Manager }

// Open reports whether every member announces that it reads the journal:
// any of them may be the next owner of a shard whose completions it names.
func (j journal) Open() bool { return j.m.journalOpen.Load() }

// Append writes lines as value seq of this session and deletes its values
// drop, at most MaxTxnOps operations a transaction. A line states a fact
// (a run ended), true whoever holds the shard when it lands, so no fence
// guards it; a session past its safe deadline writes nothing, as its
// shards' successors may be reading already.
func (j journal) Append(ctx context.Context, seq int64, lines []scheduler.JournalLine, drop []int64) error {
	m := j.m
	m.mu.Lock()
	sess := m.sess
	m.mu.Unlock()
	if sess == nil || !sess.Valid() {
		return lease.ErrLost
	}
	id := int64(sess.LeaseID())
	ops := make([]clientv3.Op, 0, 1+len(drop))
	if len(lines) > 0 {
		ops = append(ops, clientv3.OpPut(m.ks.JournalValue(m.cfg.Node, id, seq), string(scheduler.AppendJournal(nil, lines))))
	}
	for _, d := range drop {
		ops = append(ops, clientv3.OpDelete(m.ks.JournalValue(m.cfg.Node, id, d)))
	}
	if len(lines) > 0 {
		m.journalWrote.Store(id) // maybe: an unknown outcome may have landed
	}
	for len(ops) > 0 {
		n := min(len(ops), MaxTxnOps)
		if _, err := m.sendTxn(ctx, sess, nil, ops[:n], nil); err != nil {
			return fmt.Errorf("shard: journal write: %w", err)
		}
		ops = ops[n:]
	}
	return nil
}

// readJournal reports whether every member of the view announces the
// journal format this release reads (none known: no).
func (v *view) readJournal() bool {
	for _, mv := range v.members {
		if mv.info.Journal < scheduler.JournalFormat {
			return false
		}
	}
	return len(v.members) > 0
}

// sweepJournal lists the journal's sessions on a worker; journalSessions
// deletes those no member has held for Config.JournalKeep.
func (l *loop) sweepJournal() {
	if l.sweeping || !l.sess.Valid() {
		return
	}
	l.sweeping = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.sess.Context(), l.sess.TTL()/3)
		defer cancel()
		resp, err := l.m.cli.Get(ctx, l.m.ks.Journal(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		s := journalSessions{err: err, seen: map[string]bool{}}
		if err == nil {
			for _, kv := range resp.Kvs {
				if i := strings.LastIndexByte(string(kv.Key), '/'); i >= 0 {
					s.seen[string(kv.Key[:i+1])] = true
				}
			}
		}
		l.send(s)
	}()
}

// journalSessions is a sweep's listing: the session prefixes with values.
type journalSessions struct {
	seen map[string]bool
	err  error
}

func (s journalSessions) apply(l *loop) {
	l.sweeping = false
	if s.err != nil {
		return
	}
	live := make(map[string]bool, len(l.v.members))
	for node, mv := range l.v.members {
		live[l.m.ks.JournalSession(node, mv.lease)] = true
	}
	now := time.Now()
	old := l.journalDead
	l.journalDead = make(map[string]time.Time)
	for prefix := range s.seen {
		if live[prefix] {
			continue
		}
		since, ok := old[prefix]
		if !ok {
			since = now
		}
		if now.Sub(since) < l.m.cfg.JournalKeep {
			l.journalDead[prefix] = since
			continue
		}
		l.deleteJournal(prefix, "no member has held its session for JournalKeep; its shards' owners have read it", time.Time{})
	}
}

// dropOwnJournal deletes this session's journal values when it leaves
// gracefully, if it wrote any: every completion of its released shards is
// in its record. Within the leave's deadline: a leave with etcd gone waits
// no longer for it, and the sweep of another replica deletes them later.
func (l *loop) dropOwnJournal() {
	id := int64(l.sess.LeaseID())
	if l.m.journalWrote.Load() != id {
		return
	}
	l.deleteJournal(l.m.ks.JournalSession(l.m.cfg.Node, id), "this session left gracefully", l.stopBy)
}

// deleteJournal deletes one session's journal values, on a worker, by
// until at the latest (zero: a third of the TTL); a failure is retried by
// the next sweep.
func (l *loop) deleteJournal(prefix, why string, until time.Time) {
	if until.IsZero() {
		until = time.Now().Add(max(l.sess.TTL()/3, time.Second))
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithDeadline(context.Background(), until)
		defer cancel()
		if resp, err := l.m.cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			l.m.log.Warn("journal values not deleted; the next sweep tries again", "prefix", prefix, "err", err)
		} else if resp.Deleted > 0 {
			l.m.log.Info("journal values deleted", "prefix", prefix, "values", resp.Deleted, "why", why)
		}
	}()
}
