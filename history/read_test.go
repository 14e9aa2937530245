package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcron/shardcron/history"
	"github.com/shardcron/shardcron/internal/baddata"
	"github.com/shardcron/shardcron/scheduler"
)

// A job without segments shows the History of its old-format record (a
// replica of the previous release wrote it), newest first; once segments
// exist they are what is shown.
func TestReadFallsBackToRecord(t *testing.T) {
	c := newTestCluster(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	rec := scheduler.Record{Job: "old", Token: 7, LastClaimed: base.Add(2 * time.Second)}
	for k := range 3 {
		rec.History = append(rec.History, entryAt(base.Add(time.Duration(k)*time.Second), "old-node", 7))
	}
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, c.ks.Tick(1, "old"), string(b)); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(ctx, c.cli, c.ks, []history.Ref{{Shard: 1, Job: "old"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(h[0]) != 2 || !h[0][0].Tick.Equal(base.Add(2*time.Second)) || !h[0][1].Tick.Equal(base.Add(time.Second)) {
		t.Fatalf("fallback history: %+v", h[0])
	}
	n := c.start("node-a", 2)
	tok := n.h.live()[1]
	e := entryAt(base.Add(time.Minute), "node-a", tok)
	if err := n.hist.AppendHistory(ctx, 5, []scheduler.HistoryWrite{{Shard: 1, Token: tok, Job: "old", Entries: []scheduler.Entry{e}}})[0]; err != nil {
		t.Fatal(err)
	}
	h, err = history.Read(ctx, c.cli, c.ks, []history.Ref{{Shard: 1, Job: "old"}}, 5)
	if err != nil || len(h[0]) != 1 || h[0][0].Node != "node-a" {
		t.Fatalf("history with segments: %+v, %v", h, err)
	}
}

// An undecodable history segment is left out of what Read returns
// and reported; the job's other segments are still shown.
func TestReadSkipsAndReportsBadSegments(t *testing.T) {
	c := newTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seq := time.Date(2026, 3, 1, 0, 0, 10, 0, time.UTC).UnixNano()
	// One succeeded run, ticked 10 s before seq (codec.go's form).
	good := `{"e":[{"t":10000}]}`
	for _, kv := range [][2]string{
		{c.ks.RunSegment(1, "job-a", seq, 1), string(good)},
		{c.ks.RunSegment(1, "job-a", seq+1, 1), "{not json"},
		{c.ks.RunSegment(1, "job-a", seq+2, 1), `{"v":9,"e":[]}`},
	} {
		if _, err := c.cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	bad, err := baddata.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // read twice: reported once
		h, err := history.Read(ctx, c.cli, c.ks, []history.Ref{{Shard: 1, Job: "job-a"}}, 10, history.ReportTo(bad))
		if err != nil {
			t.Fatal(err)
		}
		if len(h[0]) != 1 || h[0][0].Status != scheduler.StatusSucceeded {
			t.Fatalf("history %+v, want the one good entry", h[0])
		}
	}
	if got := bad.Count(baddata.History); got != 2 {
		t.Fatalf("%d bad segments reported, want 2", got)
	}
}
