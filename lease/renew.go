package lease

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// loop is the session's one goroutine. It renews the lease with
// KeepAliveOnce on the cadence derived from the granted TTL until the
// session ends (lost or closed), then revokes the lease. It closes loopDone
// when it returns; Close joins it.
//
// It uses KeepAliveOnce rather than the client's KeepAlive stream so that
// it knows when each renewal was sent and whether it landed: the safe
// deadline is computed from the send time of the last successful renewal.
func (s *Session) loop() {
	defer close(s.loopDone)
	cad := cadenceFor(s.ttl)
	t := time.NewTimer(cad.every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			s.revokeErr = s.revoke()
			return
		case <-t.C:
		}
		s.hooks().beforeRenew(s.ctx)
		if s.ctx.Err() != nil {
			continue
		}
		sent := s.now()
		actx, cancel := context.WithTimeout(s.ctx, cad.attempt)
		resp, err := s.cli.KeepAliveOnce(actx, s.id)
		cancel()
		s.cfg.Metrics.renewed(s.now()-sent, err)
		s.hooks().afterRenew(err)
		switch {
		case err == nil:
			if s.extend(sent, resp.TTL) {
				s.hooks().renewed(sent, resp.TTL)
				cad = cadenceFor(time.Duration(resp.TTL) * time.Second)
				t.Reset(max(0, cad.every-(s.now()-sent)))
				continue
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			// KeepAliveOnce reports a response with TTL ≤ 0 this way too.
			s.lose("etcd reports the lease gone")
		case s.ctx.Err() == nil:
			s.log.Warn("lease renewal failed; retrying", "err", err, "remaining_ms", s.Remaining().Milliseconds())
		}
		t.Reset(cad.retry)
	}
}

// revoke revokes the lease until etcd confirms or reports it gone, bounded
// by the TTL (after which etcd has expired it anyway, leader elections
// aside) and by the client's life. Revoking is always safe once the session
// has ended: the node no longer acts under it.
func (s *Session) revoke() error {
	ctx, cancel := context.WithTimeout(s.cli.Ctx(), s.ttl)
	defer cancel()
	go func() {
		select {
		case <-s.giveUp:
			cancel()
		case <-ctx.Done():
		}
	}()
	cad := cadenceFor(s.ttl)
	for {
		actx, acancel := context.WithTimeout(ctx, cad.attempt)
		_, err := s.cli.Revoke(actx, s.id)
		acancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.log.Debug("lease revoked")
			return nil
		}
		select {
		case <-ctx.Done():
			s.log.Warn("lease revocation gave up; etcd expires the lease by itself", "err", err)
			return err
		case <-time.After(cad.retry):
		}
	}
}

// hooks let tests pause the renew loop, observe renewals and count
// transactions. All nil outside tests.
type hooks struct {
	clock     clock
	onBefore  func(ctx context.Context) // before a renewal is sent; may block until ctx ends
	onAfter   func(err error)           // after a renewal returned, before its result is applied
	onRenewed func(sent time.Duration, ttlSeconds int64)
	onTxn     func() // each transaction Release sends
}

func (s *Session) hooks() *hooks {
	if s.cfg.hooks == nil {
		return &noHooks
	}
	return s.cfg.hooks
}

var noHooks hooks

func (h *hooks) beforeRenew(ctx context.Context) {
	if h.onBefore != nil {
		h.onBefore(ctx)
	}
}

func (h *hooks) afterRenew(err error) {
	if h.onAfter != nil {
		h.onAfter(err)
	}
}

func (h *hooks) renewed(sent time.Duration, ttl int64) {
	if h.onRenewed != nil {
		h.onRenewed(sent, ttl)
	}
}

func (h *hooks) txn() {
	if h.onTxn != nil {
		h.onTxn()
	}
}
