package receiver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // a pure-Go SQLite for the SQL store's tests
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	testRetention = time.Hour
	testPending   = time.Minute
)

// impl is one Store implementation under the contract tests.
type impl struct {
	name string
	open func(t *testing.T, c *clock) Store
	// expire makes s forget the keys accepted a retention before c.Now().
	expire func(t *testing.T, s Store, c *clock)
}

func impls() []impl {
	return []impl{
		{
			name: "memory",
			open: func(t *testing.T, c *clock) Store {
				m, err := NewMemory(MemoryConfig{Retention: testRetention, Pending: testPending, Now: c.Now})
				if err != nil {
					t.Fatal(err)
				}
				return m
			},
			expire: func(*testing.T, Store, *clock) {}, // Memory sweeps itself
		},
		{
			name: "sqlite",
			open: func(t *testing.T, c *clock) Store {
				s, err := NewSQL(openSQLite(t), SQLConfig{Pending: testPending, Now: c.Now})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			expire: func(t *testing.T, s Store, c *clock) {
				if _, err := s.(*SQL).Prune(context.Background(), c.Now().Add(-testRetention)); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
}

// openSQLite opens a fresh SQLite database file with the store's tables.
// Transactions take the write lock when they begin and wait for it, as
// SQL's doc asks.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "receiver.db") + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(DDL); err != nil {
		t.Fatal(err)
	}
	return db
}

// each runs f against every implementation.
func each(t *testing.T, f func(t *testing.T, s Store, c *clock, im impl)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			c := newClock()
			f(t, im.open(t, c), c, im)
		})
	}
}

var tick0 = time.Date(2026, 12, 1, 11, 59, 0, 0, time.UTC)

func del(cluster, job string, shard int, token int64) Delivery {
	return Delivery{Cluster: cluster, Job: job, Tick: tick0, Shard: shard, Token: token}
}

func admit(t *testing.T, s Store, d Delivery, want Verdict) Decision {
	t.Helper()
	dec, err := s.Admit(context.Background(), d)
	if err != nil {
		t.Fatalf("Admit(%+v): %v", d, err)
	}
	if dec.Verdict != want {
		t.Fatalf("Admit(%s/%s shard %d token %d) = %v, want %v", d.Cluster, d.Job, d.Shard, d.Token, dec.Verdict, want)
	}
	return dec
}

func complete(t *testing.T, s Store, d Delivery, status int) {
	t.Helper()
	if err := s.Complete(context.Background(), d.Key(), status); err != nil {
		t.Fatal(err)
	}
}

// The two rules in sequence: a key applies once and its repeat replays the
// outcome; a lower token after a higher one is stale, an equal one is not;
// a stale repeat is stale.
func TestContractRules(t *testing.T) {
	each(t, func(t *testing.T, s Store, _ *clock, _ impl) {
		a := del("c", "a", 1, 5)
		admit(t, s, a, Accept)
		complete(t, s, a, 201)
		if dec := admit(t, s, a, Repeat); dec.Status != 201 || dec.Highest != 5 {
			t.Errorf("repeat = %+v, want status 201, highest 5", dec)
		}
		b := del("c", "b", 1, 4)
		if dec := admit(t, s, b, Stale); dec.Highest != 5 {
			t.Errorf("stale = %+v, want highest 5", dec)
		}
		admit(t, s, del("c", "b", 1, 5), Accept) // equal: the same owner
		admit(t, s, del("c", "a", 1, 7), Repeat) // a re-run by a newer owner raises the token
		admit(t, s, del("c", "c", 1, 6), Stale)
		admit(t, s, del("c", "a", 1, 6), Stale) // stale beats repeat
		late := del("c", "a", 1, 7)
		late.Tick = tick0.Add(time.Microsecond) // a manual tick is a key of its own
		admit(t, s, late, Accept)
	})
}

// Tokens compare only within one (cluster, shard).
func TestContractTokensPerShard(t *testing.T) {
	each(t, func(t *testing.T, s Store, _ *clock, _ impl) {
		admit(t, s, del("c", "a", 1, 100), Accept)
		admit(t, s, del("c", "b", 2, 1), Accept) // another shard
		admit(t, s, del("d", "c", 1, 1), Accept) // another cluster's shard 1
		admit(t, s, del("d", "a", 1, 2), Accept) // another cluster's key
		admit(t, s, del("c", "d", 1, 99), Stale) // still compared in (c, 1)
		admit(t, s, del("c", "e", 2, 1), Accept) // (c, 2) is at 1
		admit(t, s, del("d", "f", 1, 1), Stale)  // (d, 1) is at 2
		admit(t, s, del("c", "a", 1, 100), Pending)
	})
}

// A forgotten key (its effect did not take place) is accepted again; a key
// left pending is taken over once Pending has passed.
func TestContractForgetAndPending(t *testing.T) {
	each(t, func(t *testing.T, s Store, c *clock, _ impl) {
		a := del("c", "a", 1, 1)
		admit(t, s, a, Accept)
		if err := s.Forget(context.Background(), a.Key()); err != nil {
			t.Fatal(err)
		}
		admit(t, s, a, Accept)
		c.Advance(testPending - time.Second)
		admit(t, s, a, Pending)
		c.Advance(2 * time.Second)
		admit(t, s, a, Accept) // the first is presumed dead
		admit(t, s, a, Pending)
		complete(t, s, a, 200)
		admit(t, s, a, Repeat)
		if err := s.Forget(context.Background(), a.Key()); err != nil {
			t.Fatal(err)
		}
		admit(t, s, a, Repeat) // Forget drops only a pending key
	})
}

// A key is remembered for the retention, not after; tokens are kept.
func TestContractRetention(t *testing.T) {
	each(t, func(t *testing.T, s Store, c *clock, im impl) {
		a, b := del("c", "a", 1, 3), del("c", "b", 1, 3)
		admit(t, s, a, Accept)
		complete(t, s, a, 200)
		c.Advance(testRetention / 2)
		admit(t, s, b, Accept)
		complete(t, s, b, 200)
		c.Advance(testRetention/2 + time.Second)
		im.expire(t, s, c)
		admit(t, s, a, Accept) // forgotten: applied again
		admit(t, s, b, Repeat) // younger than the retention
		admit(t, s, del("c", "z", 1, 2), Stale)
		if m, ok := s.(*Memory); ok && m.Len() != 2 {
			t.Errorf("Memory keeps %d keys, want 2", m.Len())
		}
	})
}

// Concurrent deliveries of one key apply once; concurrent deliveries
// with mixed tokens never accept a key twice, and a stale answer always
// names a higher token.
func TestContractConcurrent(t *testing.T) {
	each(t, func(t *testing.T, s Store, _ *clock, _ impl) {
		const workers, rounds = 8, 20
		var mu sync.Mutex
		accepted := map[Key]int{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					// every worker delivers the same keys, each with its
					// own token: 1..workers, on two shards
					d := del("c", fmt.Sprintf("job-%d", r%5), r%2, int64(1+(w+r)%workers))
					d.Tick = tick0.Add(time.Duration(r/5) * time.Second)
					dec, err := s.Admit(context.Background(), d)
					if err != nil {
						t.Error(err)
						return
					}
					switch dec.Verdict {
					case Accept:
						mu.Lock()
						accepted[d.Key()]++
						mu.Unlock()
						if err := s.Complete(context.Background(), d.Key(), 200); err != nil {
							t.Error(err)
						}
					case Stale:
						if dec.Highest <= d.Token {
							t.Errorf("stale token %d with highest %d", d.Token, dec.Highest)
						}
					}
				}
			})
		}
		wg.Wait()
		if len(accepted) == 0 {
			t.Fatal("nothing accepted")
		}
		for k, n := range accepted {
			if n != 1 {
				t.Errorf("key %v accepted %d times", k, n)
			}
		}
		// every token of the shard is now stale but the highest
		admit(t, s, del("c", "late", 0, workers-1), Stale)
		admit(t, s, del("c", "late", 0, workers), Accept)
	})
}

// docs/receiver.md shows the DDL as it is.
func TestDocsShowDDL(t *testing.T) {
	doc, err := os.ReadFile("../docs/receiver.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```sql\n"+DDL+"```") {
		t.Error("docs/receiver.md does not show receiver.DDL as it is")
	}
}
