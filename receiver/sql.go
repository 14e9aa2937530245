package receiver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DDL creates the SQL store's two tables and an index, as SQLite and
// PostgreSQL accept it (MySQL: drop the index's IF NOT EXISTS). Ticks and
// times are Unix nanoseconds.
const DDL = `CREATE TABLE IF NOT EXISTS shardcron_fence (
    cluster VARCHAR(255) NOT NULL,
    shard   INTEGER      NOT NULL,
    token   BIGINT       NOT NULL, -- the highest fencing token seen
    PRIMARY KEY (cluster, shard)
);
CREATE TABLE IF NOT EXISTS shardcron_keys (
    cluster VARCHAR(255) NOT NULL,
    job     VARCHAR(255) NOT NULL, -- the job, or "<job>:<item>" for an item
    tick    BIGINT       NOT NULL, -- Unix nanoseconds
    token   BIGINT       NOT NULL, -- of the accepted delivery
    status  INTEGER      NOT NULL, -- 0 while pending, else the outcome
    seen_at BIGINT       NOT NULL, -- accepted at, Unix nanoseconds
    PRIMARY KEY (cluster, job, tick)
);
CREATE INDEX IF NOT EXISTS shardcron_keys_seen_at ON shardcron_keys (seen_at);
`

// SQLConfig configures an SQL store.
type SQLConfig struct {
	// Dollar selects $1, $2, ... placeholders (PostgreSQL) instead of ?
	// (SQLite, MySQL).
	Dollar bool
	// Pending is how long an accepted key may stay without an outcome
	// before another delivery takes it over (default DefaultPending).
	Pending time.Duration
	// Attempts bounds Admit's tries when its transaction fails, as when
	// two first deliveries of a shard insert its token row at once and
	// one gets a unique-key violation (default 3).
	Attempts int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate checks c.
func (c SQLConfig) Validate() error {
	if c.Pending < 0 || c.Attempts < 0 {
		return fmt.Errorf("%w: negative pending or attempts", ErrConfig)
	}
	return nil
}

// SQL is a Store in a database reached through database/sql, with the
// tables of DDL. Admit runs in a transaction of its own; AdmitTx runs in
// the caller's, so the effect can commit with it (package doc). Keys are
// kept until Prune.
//
// With SQLite, open the database so that a transaction takes the write
// lock when it begins and waits for it (modernc.org/sqlite:
// "?_txlock=immediate&_pragma=busy_timeout(5000)"), or concurrent Admits
// fail with "database is locked" instead of waiting their turn.
type SQL struct {
	db  *sql.DB
	cfg SQLConfig
}

// NewSQL returns an SQL store over db, whose tables must exist (DDL).
func NewSQL(db *sql.DB, cfg SQLConfig) (*SQL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Pending == 0 {
		cfg.Pending = DefaultPending
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &SQL{db: db, cfg: cfg}, nil
}

// Admit implements Store: one transaction of its own, retried up to
// Attempts times when it fails.
func (s *SQL) Admit(ctx context.Context, d Delivery) (Decision, error) {
	var err error
	for range s.cfg.Attempts {
		var dec Decision
		if dec, err = s.admitOnce(ctx, d); err == nil || ctx.Err() != nil {
			return dec, err
		}
	}
	return Decision{}, err
}

func (s *SQL) admitOnce(ctx context.Context, d Delivery) (Decision, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Decision{}, s.wrap(d, err)
	}
	defer func() { _ = tx.Rollback() }()
	dec, err := s.admit(ctx, tx, d, 0)
	if err != nil {
		return Decision{}, err
	}
	return dec, s.wrap(d, tx.Commit())
}

// AdmitTx applies both rules to d inside tx, the caller's transaction.
// An accepted key is recorded as done (status 200): write the effect in tx
// and commit, and the token, the key and the effect land together, or
// roll back and none does. Repeat and Stale change nothing worth keeping:
// roll back or commit. A failed statement leaves tx unusable (PostgreSQL):
// roll it back and try again.
func (s *SQL) AdmitTx(ctx context.Context, tx *sql.Tx, d Delivery) (Decision, error) {
	return s.admit(ctx, tx, d, 200)
}

// admit is both rules in tx. status is what an accepted key is recorded
// with: 0 (pending) when the effect comes after the commit.
func (s *SQL) admit(ctx context.Context, tx *sql.Tx, d Delivery, status int) (Decision, error) {
	now := s.cfg.Now().UnixNano()
	// Raise the shard's token. The UPDATE locks the row until commit, also
	// when the token is equal, so decisions of one shard are serialized.
	res, err := tx.ExecContext(ctx, s.q(`UPDATE shardcron_fence SET token = ? WHERE cluster = ? AND shard = ? AND token <= ?`),
		d.Token, d.Cluster, d.Shard, d.Token)
	if err != nil {
		return Decision{}, s.wrap(d, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Decision{}, s.wrap(d, err)
	} else if n == 0 { // no row, or a higher token (or MySQL's "unchanged")
		var high int64
		err := tx.QueryRowContext(ctx, s.q(`SELECT token FROM shardcron_fence WHERE cluster = ? AND shard = ?`), d.Cluster, d.Shard).Scan(&high)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO shardcron_fence (cluster, shard, token) VALUES (?, ?, ?)`), d.Cluster, d.Shard, d.Token); err != nil {
				return Decision{}, s.wrap(d, err)
			}
		case err != nil:
			return Decision{}, s.wrap(d, err)
		case high > d.Token:
			return Decision{Verdict: Stale, Highest: high}, nil
		}
	}
	dec := Decision{Highest: d.Token}
	k := d.Key()
	var st int
	var seen int64
	err = tx.QueryRowContext(ctx, s.q(`SELECT status, seen_at FROM shardcron_keys WHERE cluster = ? AND job = ? AND tick = ?`),
		k.Cluster, k.Unit(), k.Tick).Scan(&st, &seen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO shardcron_keys (cluster, job, tick, token, status, seen_at) VALUES (?, ?, ?, ?, ?, ?)`),
			k.Cluster, k.Unit(), k.Tick, d.Token, status, now)
		dec.Verdict = Accept
	case err != nil:
	case st != 0:
		dec.Verdict, dec.Status = Repeat, st
	case time.Duration(now-seen) < s.cfg.Pending:
		dec.Verdict = Pending
	default: // pending too long: its first delivery is presumed dead
		var res sql.Result
		res, err = tx.ExecContext(ctx, s.q(`UPDATE shardcron_keys SET token = ?, status = ?, seen_at = ? WHERE cluster = ? AND job = ? AND tick = ? AND status = 0 AND seen_at = ?`),
			d.Token, status, now, k.Cluster, k.Unit(), k.Tick, seen)
		if n, e := rowsAffected(res, err); e == nil && n == 0 {
			err = errChanged // a Complete or Forget came in between: try again
		}
		dec.Verdict = Accept
	}
	if err != nil {
		return Decision{}, s.wrap(d, err)
	}
	return dec, nil
}

// errChanged is a key row changed under a conditional UPDATE; Admit tries
// again.
var errChanged = errors.New("key changed concurrently")

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Complete implements Store.
func (s *SQL) Complete(ctx context.Context, k Key, status int) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE shardcron_keys SET status = ? WHERE cluster = ? AND job = ? AND tick = ? AND status = 0`),
		status, k.Cluster, k.Unit(), k.Tick)
	return s.wrapKey(k, err)
}

// Forget implements Store.
func (s *SQL) Forget(ctx context.Context, k Key) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM shardcron_keys WHERE cluster = ? AND job = ? AND tick = ? AND status = 0`),
		k.Cluster, k.Unit(), k.Tick)
	return s.wrapKey(k, err)
}

// Prune forgets the keys accepted before t and returns how many: run it
// now and then with t = now minus the retention (package doc, what is not
// guaranteed). Token rows are kept: one per (cluster, shard).
func (s *SQL) Prune(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM shardcron_keys WHERE seen_at < ?`), t.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("receiver: prune: %w", err)
	}
	return res.RowsAffected()
}

// q rewrites ? placeholders as $n when the database wants those. No query
// here has a ? inside a literal.
func (s *SQL) q(query string) string {
	if !s.cfg.Dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *SQL) wrap(d Delivery, err error) error { return s.wrapKey(d.Key(), err) }

func (s *SQL) wrapKey(k Key, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("receiver: key (%q, %q, %d): %w", k.Cluster, k.Unit(), k.Tick, err)
}
