package receiver

import (
	"context"
	"testing"
)

// AdmitTx in the caller's transaction: rolled back, neither the key nor
// the token nor the effect lands; committed, all three do.
func TestAdmitTx(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	if _, err := db.Exec(`CREATE TABLE effects (job TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	s, err := NewSQL(db, SQLConfig{})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(d Delivery, commit bool) Verdict {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		dec, err := s.AdmitTx(ctx, tx, d)
		if err != nil {
			t.Fatal(err)
		}
		if dec.Verdict == Accept {
			if _, err := tx.Exec(`INSERT INTO effects (job) VALUES (?)`, d.Job); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		return dec.Verdict
	}
	a := del("c", "a", 1, 5)
	if v := apply(a, false); v != Accept {
		t.Fatalf("first: %v", v)
	}
	admit(t, s, del("c", "b", 1, 4), Accept) // the token 5 was rolled back too
	if v := apply(a, true); v != Accept {
		t.Fatalf("again: %v", v)
	}
	if v := apply(a, true); v != Repeat {
		t.Fatalf("repeat: %v", v)
	}
	if v := apply(del("c", "c", 1, 4), true); v != Stale {
		t.Fatalf("stale: %v", v)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d effects (%v), want 1", n, err)
	}
}

func TestDollarPlaceholders(t *testing.T) {
	s := &SQL{cfg: SQLConfig{Dollar: true}}
	if got := s.q(`UPDATE t SET a = ? WHERE b = ? AND c <= ?`); got != `UPDATE t SET a = $1 WHERE b = $2 AND c <= $3` {
		t.Errorf("q = %s", got)
	}
}
