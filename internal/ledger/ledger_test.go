package ledger

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/receiver"
)

func headers(job, tick, shard, token string) http.Header {
	h := http.Header{}
	h.Set("Shardcron-Job", job)
	h.Set("Shardcron-Tick", tick)
	h.Set("Shardcron-Shard", shard)
	h.Set("Shardcron-Fencing-Token", token)
	h.Set("Shardcron-Node", "n1")
	return h
}

func TestParse(t *testing.T) {
	at := time.Now()
	f, err := Parse(headers("j", "2026-11-30T20:00:01.000123Z", "7", "42"), at)
	if err != nil {
		t.Fatal(err)
	}
	want := Fire{Job: "j", Tick: time.Date(2026, 11, 30, 20, 0, 1, 123000, time.UTC), Shard: 7, Token: 42, Node: "n1", At: at}
	if f != want {
		t.Errorf("Parse = %+v, want %+v", f, want)
	}
	for _, h := range []http.Header{
		headers("", "2026-11-30T20:00:01Z", "7", "42"),
		headers("j", "yesterday", "7", "42"),
		headers("j", "2026-11-30T20:00:01Z", "seven", "42"),
		headers("j", "2026-11-30T20:00:01Z", "7", ""),
	} {
		if _, err := Parse(h, at); err != ErrIdentity {
			t.Errorf("Parse(%v) = %v, want ErrIdentity", h, err)
		}
	}
}

// A lower token than the shard's highest is rejected; an equal or higher
// one is accepted; an accepted repeat of a (job, tick) is a duplicate, and
// a manual tick a microsecond off the whole second is a tick of its own.
func TestRecord(t *testing.T) {
	l := New()
	t0 := time.Date(2026, 11, 30, 20, 0, 1, 0, time.UTC)
	at := t0.Add(5 * time.Millisecond)
	steps := []struct {
		f             Fire
		accepted, dup bool
	}{
		{Fire{Job: "a", Tick: t0, Shard: 1, Token: 5, At: at}, true, false},
		{Fire{Job: "a", Tick: t0, Shard: 1, Token: 4, At: at}, false, false}, // stale
		{Fire{Job: "a", Tick: t0, Shard: 1, Token: 5, At: at}, true, true},
		{Fire{Job: "a", Tick: t0.Add(time.Microsecond), Shard: 1, Token: 6, At: at}, true, false},
		{Fire{Job: "b", Tick: t0, Shard: 2, Token: 1, At: at}, true, false},  // another shard's tokens
		{Fire{Job: "a", Tick: t0, Shard: 1, Token: 5, At: at}, false, false}, // 6 seen since
	}
	for i, s := range steps {
		s.f.At = s.f.At.Add(time.Duration(i) * time.Millisecond) // in order of receipt
		got := l.Record(s.f)
		if got.Accepted != s.accepted || got.Dup != s.dup {
			t.Errorf("step %d: accepted %v dup %v, want %v %v", i, got.Accepted, got.Dup, s.accepted, s.dup)
		}
	}
	if s := l.Seen("a", t0); s.N != 2 || !s.First.Equal(at) {
		t.Errorf("Seen(a, t0) = %+v, want 2 runs, the first at %v", s, at)
	}
	if n := l.Stale(); n != 2 {
		t.Errorf("Stale = %d, want 2", n)
	}
	if n := len(l.Fires()); n != len(steps) {
		t.Errorf("%d fires, want %d", n, len(steps))
	}
	if fs := l.Since(at.Add(4 * time.Millisecond)); len(fs) != 2 || fs[0].Job != "b" {
		t.Errorf("Since(the fifth's receipt) = %+v, want the last two", fs)
	}
}

// Behind receiver.Middleware with Observe, the ledger counts what the
// middleware judged: the repeat a duplicate (and not passed on), the
// stale token rejected.
func TestObserve(t *testing.T) {
	l := New()
	applied := 0
	h := receiver.Middleware(l.Store(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		applied++
		w.WriteHeader(http.StatusNoContent)
	}), receiver.WithObserver(l.Observe))
	for i, s := range []struct {
		token string
		code  int
	}{{"5", http.StatusNoContent}, {"5", http.StatusOK}, {"4", http.StatusConflict}} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header = headers("j", "2026-11-30T20:00:01Z", "7", s.token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != s.code {
			t.Errorf("step %d: %d, want %d", i, rec.Code, s.code)
		}
	}
	fs := l.Fires()
	if applied != 1 || len(fs) != 3 || fs[0].Dup || !fs[1].Dup || !fs[1].Accepted || fs[2].Accepted || l.Stale() != 1 {
		t.Errorf("applied %d, fires %+v, stale %d", applied, fs, l.Stale())
	}
}

// Each item of a sharded job's tick is counted on its own: two items of
// one tick are two runs, an item's repeat a duplicate; the fires carry the
// item, and their JSON names it only for an item.
func TestItems(t *testing.T) {
	l := New()
	h := receiver.Middleware(l.Store(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), receiver.WithObserver(l.Observe))
	for _, item := range []string{"eu", "us", "eu", ""} {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.Header = headers("j", "2026-11-30T20:00:01Z", "7", "5")
		if item != "" {
			req.Header.Set("Shardcron-Item-Name", item)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	t0 := time.Date(2026, 11, 30, 20, 0, 1, 0, time.UTC)
	for item, n := range map[string]int{"eu": 2, "us": 1, "": 1} {
		if s := l.SeenItem("j", item, t0); s.N != n {
			t.Errorf("SeenItem(j, %q) = %+v, want %d runs", item, s, n)
		}
	}
	fs := l.Fires()
	if len(fs) != 4 || fs[0].Item != "eu" || fs[1].Item != "us" || fs[1].Dup || !fs[2].Dup || fs[3].Item != "" || fs[3].Dup {
		t.Fatalf("fires %+v", fs)
	}
	if js, _ := json.Marshal(fs[0]); !strings.Contains(string(js), `"item":"eu"`) {
		t.Errorf("item's fire as JSON: %s", js)
	}
	if js, _ := json.Marshal(fs[3]); strings.Contains(string(js), `"item"`) {
		t.Errorf("plain fire as JSON names an item: %s", js)
	}
}
