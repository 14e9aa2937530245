package receiver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Each item of a sharded job's tick is a key of its own: two items of one
// tick apply twice, one item twice applies once, and the job's items never
// meet a plain job's key of the same name and tick.
func TestContractItems(t *testing.T) {
	each(t, func(t *testing.T, s Store, _ *clock, _ impl) {
		eu, us := del("c", "sweep", 1, 5), del("c", "sweep", 2, 5)
		eu.Item, us.Item = "eu", "us"
		admit(t, s, eu, Accept)
		complete(t, s, eu, 200)
		admit(t, s, us, Accept)
		complete(t, s, us, 200)
		admit(t, s, eu, Repeat)
		admit(t, s, us, Repeat)
		admit(t, s, del("c", "sweep", 1, 5), Accept) // the plain job's key
	})
}

// Over HTTP the item comes from Shardcron-Item-Name, else Shardcron-Item:
// the handler runs for each item of a tick once, whichever header names it.
func TestMiddlewareItems(t *testing.T) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	applied := map[string]int{}
	srv := httptest.NewServer(Middleware(m, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		d, _ := FromContext(r.Context())
		mu.Lock()
		applied[d.Item]++
		mu.Unlock()
	})))
	defer srv.Close()
	item := func(name string) Delivery { d := del("c", "sweep", 4, 9); d.Item = name; return d }
	for _, d := range []Delivery{item("0"), item("1"), item("1"), item("0")} {
		if code := send(t, srv.URL, d).StatusCode; code != http.StatusOK {
			t.Errorf("item %s: %d", d.Item, code)
		}
	}
	// Item 1 by its index alone is the same key as by its name.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	d := del("c", "sweep", 4, 9)
	req.Header.Set(HeaderJob, d.Job)
	req.Header.Set(HeaderCluster, d.Cluster)
	req.Header.Set(HeaderTick, "2026-12-01T11:59:00Z")
	req.Header.Set(HeaderShard, "4")
	req.Header.Set(HeaderFencingToken, "9")
	req.Header.Set(HeaderItem, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 2 || applied["0"] != 1 || applied["1"] != 1 {
		t.Errorf("applied %v, want items 0 and 1 once each", applied)
	}
}

// An exec run's item comes from SHARDCRON_ITEM_NAME; an item name with
// ':' is no item of shardcron's.
func TestExecItem(t *testing.T) {
	ctx := context.Background()
	s, err := NewSQL(openSQLite(t), SQLConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run := map[string]string{
		EnvCluster: "prod", EnvJob: "sweep", EnvTick: "2026-12-01T12:00:00Z", EnvShard: "17",
		EnvFencingToken: "42", EnvItem: "3", EnvItemName: "eu-west",
	}
	for _, name := range []string{"eu-west", "us-east"} {
		run[EnvItemName] = name
		tk, err := Exec(ctx, s, env(run))
		if err != nil || !tk.Proceed() || tk.Item != name {
			t.Fatalf("item %s: %+v, %v", name, tk, err)
		}
		if err := tk.Done(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if tk, err := Exec(ctx, s, env(run)); err != nil || tk.Verdict != Repeat {
		t.Errorf("repeat of us-east: %+v, %v", tk, err)
	}
	run[EnvItemName] = "a:b"
	if _, err := Exec(ctx, s, env(run)); !errors.Is(err, ErrIdentity) {
		t.Errorf("item a:b: %v, want ErrIdentity", err)
	}
}
