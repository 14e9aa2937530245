package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// Release is one shard to release: its token, when its owner stopped
// firing it (the successor runs every tick due since then) and the ticks in
// flight it never started (Marker.Handed). A zero StoppedAt writes no
// marker: the release hands over no window.
type Release struct {
	Token     Token
	StoppedAt time.Time
	Handed    map[string][]time.Time
}

// Create puts key = value attached to the session's lease if the key does
// not exist (a member key), and returns the revision that created it. It
// returns ErrExists if the key exists (under any lease, or none).
func (s *Session) Create(ctx context.Context, key, value string) (int64, error) {
	if !s.Valid() {
		return 0, s.refuse("create " + key)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(s.id))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("lease: create %s: %w", key, s.checkGone(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s%s", ErrExists, key, holder(resp))
	}
	return resp.Header.Revision, nil
}

// Acquire takes the lease of shard for this session: a transaction that
// puts the shard key, attached to the session's lease, only if it does not
// exist. The returned token's generation is the key's CreateRevision. It
// returns ErrHeld if the key exists, and refuses (ErrLost, ErrClosed) when
// the session is not valid.
//
// The same transaction reads and deletes the shard's _released marker: a
// marker speaks only for the ownership it ended, so only the first
// acquisition after a release gets it (nil when there is none). A marker
// that does not parse (or is in a newer format) is consumed all the same
// and reported as the error of an otherwise successful acquisition: the
// token is valid and the caller holds the shard.
func (s *Session) Acquire(ctx context.Context, shard int, value string) (Token, *Marker, error) {
	if shard < 0 || shard >= keyspace.MaxShards {
		return Token{}, nil, fmt.Errorf("%w: shard %d out of range", ErrInvalid, shard)
	}
	if !s.Valid() {
		return Token{}, nil, s.refuse(fmt.Sprintf("acquire shard %d", shard))
	}
	key, marker := s.ks.Shard(shard), s.ks.Released(shard)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(s.id)),
			clientv3.OpDelete(marker, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return Token{}, nil, fmt.Errorf("lease: acquire shard %d: %w", shard, s.checkGone(err))
	}
	if !resp.Succeeded {
		return Token{}, nil, fmt.Errorf("%w: shard %d%s", ErrHeld, shard, holder(resp))
	}
	tok := Token{Shard: shard, Generation: resp.Header.Revision}
	prev := resp.Responses[1].GetResponseDeleteRange().GetPrevKvs()
	if len(prev) == 0 {
		return tok, nil, nil
	}
	m, err := ParseMarker(prev[0].Value)
	if err != nil {
		return tok, nil, fmt.Errorf("shard %d acquired, its release marker consumed: %w", shard, err)
	}
	return tok, &m, nil
}

// MarkerBefore reads the _released marker of tok's shard as it was just
// before tok's acquisition, which consumed it: for an acquisition whose
// outcome was unknown and is confirmed later. Nil when there was none; an
// error when etcd has compacted that revision away.
func (s *Session) MarkerBefore(ctx context.Context, tok Token) (*Marker, error) {
	resp, err := s.cli.Get(ctx, s.ks.Released(tok.Shard), clientv3.WithRev(tok.Generation-1))
	if err != nil {
		return nil, fmt.Errorf("lease: read the release marker of shard %d before token %d: %w", tok.Shard, tok.Generation, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	m, err := ParseMarker(resp.Kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("shard %d: %w", tok.Shard, err)
	}
	return &m, nil
}

// holder describes the key an Else branch read, for error messages.
func holder(resp *clientv3.TxnResponse) string {
	if len(resp.Responses) == 0 {
		return ""
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return ""
	}
	return fmt.Sprintf(" (generation %d, lease %016x)", kvs[0].CreateRevision, kvs[0].Lease)
}

// Release releases shards: for each, in one transaction guarded by its
// token (Guard), it deletes the shard key and puts ticks/<shard>/_released
// (no lease) = the encoded Marker. Releases are batched, MaxTxnOps/2 per
// transaction. When a transaction's guard fails, its failure branch reads
// the shard keys back in the same round trip; the releases whose key no
// longer carries their generation get ErrNotHeld, and the rest are sent
// again.
//
// It returns one result per release, in order: nil (released), ErrNotHeld,
// or ErrInvalid (the shard appears earlier in rs). The second result is
// non-nil when Release stopped early (the session ended, or an RPC failed,
// in which case the outcome of the releases not yet confirmed is unknown);
// those releases carry the same error.
func (s *Session) Release(ctx context.Context, rs []Release) ([]error, error) {
	errs := make([]error, len(rs))
	pending := make([]int, 0, len(rs))
	seen := make(map[int]bool, len(rs))
	for i, r := range rs {
		if seen[r.Token.Shard] {
			errs[i] = fmt.Errorf("%w: shard %d released twice in one call", ErrInvalid, r.Token.Shard)
			continue
		}
		seen[r.Token.Shard] = true
		pending = append(pending, i)
	}
	per := s.cfg.MaxTxnOps / 2
	fail := func(err error) ([]error, error) {
		for _, i := range pending {
			errs[i] = err
		}
		return errs, err
	}
	markers := make([][]byte, len(rs))
	for _, i := range pending {
		if r := rs[i]; !r.StoppedAt.IsZero() {
			markers[i] = Marker{StoppedAt: r.StoppedAt, Generation: r.Token.Generation, Handed: r.Handed}.Encode()
		}
	}
	for len(pending) > 0 {
		// At most per releases, and markers of at most maxReleaseBytes
		// (a marker naming handed ticks can be large), one at the least.
		n, size := 0, 0
		for n < min(per, len(pending)) && (n == 0 || size+len(markers[pending[n]]) <= maxReleaseBytes) {
			size += len(markers[pending[n]])
			n++
		}
		batch := pending[:n]
		if !s.Valid() {
			return fail(s.refuse(fmt.Sprintf("release of %d shards", len(pending))))
		}
		cmps := make([]clientv3.Cmp, 0, len(batch))
		ops := make([]clientv3.Op, 0, 2*len(batch))
		reads := make([]clientv3.Op, 0, len(batch))
		for _, i := range batch {
			r := rs[i]
			cmps = append(cmps, Guard(s.ks, r.Token))
			ops = append(ops, clientv3.OpDelete(s.ks.Shard(r.Token.Shard)))
			if markers[i] != nil {
				ops = append(ops, clientv3.OpPut(s.ks.Released(r.Token.Shard), string(markers[i])))
			}
			reads = append(reads, clientv3.OpGet(s.ks.Shard(r.Token.Shard), clientv3.WithKeysOnly()))
		}
		s.hooks().txn()
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(reads...).Commit()
		if err != nil {
			return fail(fmt.Errorf("lease: release: %w", err))
		}
		if resp.Succeeded {
			pending = pending[len(batch):]
			continue
		}
		kept := make([]int, 0, len(batch))
		for j, i := range batch {
			tok := rs[i].Token
			kvs := resp.Responses[j].GetResponseRange().GetKvs()
			if len(kvs) == 0 || kvs[0].CreateRevision != tok.Generation {
				errs[i] = fmt.Errorf("%w: shard %d token %d", ErrNotHeld, tok.Shard, tok.Generation)
				continue
			}
			kept = append(kept, i)
		}
		if len(kept) == len(batch) {
			// Impossible: a deleted key never regains its CreateRevision, so
			// a failed guard stays failed. Refuse to loop on it.
			return fail(errors.New("lease: release: a guard failed but every shard reads as held"))
		}
		pending = append(kept, pending[len(batch):]...)
	}
	return errs, nil
}

// Resign releases every shard in rs, then ends the session and revokes its
// lease. The error joins the releases' errors and the revocation's. If ctx
// ends while the revocation is still running it returns ctx's error; the
// revocation goes on and Close waits for it.
func (s *Session) Resign(ctx context.Context, rs []Release) error {
	errs, err := s.Release(ctx, rs)
	if err == nil {
		err = errors.Join(errs...)
	}
	s.end(ErrClosed, "resigned")
	select {
	case <-s.loopDone:
		return errors.Join(err, s.revokeErr)
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
}
