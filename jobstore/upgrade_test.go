package jobstore

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// This release reads the formats 1 and 2 sets that the last landed main
// (7359ad3) wrote, keeps their Since across an upgrade to format 3, and
// writes format 2 again on the way down. testdata/7359ad3/*.json are the
// jobs/ keys 7359ad3 left after two applies (dump_test.go.txt, run in a
// checkout of 7359ad3, wrote them): 200 jobs at 00:00, then job 7 edited
// and job 200 added at 01:00.
func TestUpgradeReadsWhat7359ad3Wrote(t *testing.T) {
	for _, name := range []string{"format1", "format2"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile("testdata/7359ad3/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var kvs map[string][]byte
			if err := json.Unmarshal(b, &kvs); err != nil {
				t.Fatal(err)
			}
			cli := etcdtest.Start(t).Client(t)
			ks := keyspace.New("old7359")
			ctx := testCtx(t, time.Minute)
			for k, v := range kvs {
				if _, err := cli.Put(ctx, k, string(v)); err != nil {
					t.Fatal(err)
				}
			}
			want := jobs(0, 201, 1)
			want[7].Schedule = "@every 7s"
			got := mustLoad(t, cli, ks)
			midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			checkSince := func(when string, js []config.Job) {
				t.Helper()
				if fingerprint(js) != fingerprint(want) {
					t.Fatalf("%s: the set differs from what 7359ad3 applied", when)
				}
				for _, j := range js {
					at := midnight
					if j.Name == "job-0000200" {
						at = midnight.Add(time.Hour)
					}
					if !j.Since.Equal(at) {
						t.Fatalf("%s: %s since %v, want %v", when, j.Name, j.Since, at)
					}
				}
			}
			checkSince("as 7359ad3 wrote it", got.Jobs)

			// Every member reads format 3: the next apply (an edit) writes it.
			want[9].Schedule = "@every 9s"
			up := mustApply(t, cli, ks, want, ApplyOptions{Shards: 16, Format: 3})
			if up.Format != 3 || (name == "format2" && up.Parts != 1) {
				t.Fatalf("the first format 3 apply over %s = %+v, want format 3 (one part over format 2)", name, up)
			}
			checkSince("after the upgrade", mustLoad(t, cli, ks).Jobs)

			// A member of 7359ad3 joins again: format 2, the parts as they are.
			down := mustApply(t, cli, ks, want, ApplyOptions{Shards: 16})
			if !down.Applied || down.Format != 2 || down.Parts != 0 {
				t.Fatalf("an unchanged set applied for a format 2 member = %+v, want a format 2 pointer only", down)
			}
			resp, err := cli.Get(ctx, ks.JobsCurrent())
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Format int               `json:"format"`
				Parts  []json.RawMessage `json:"parts"`
				Pages  json.RawMessage   `json:"pages"`
			}
			if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil || p.Format != 2 || len(p.Parts) == 0 || p.Pages != nil {
				t.Fatalf("pointer after the downgrade %s: %v; want format 2 listing parts, no pages", resp.Kvs[0].Value, err)
			}
			if pk := pageKeys(t, cli, ks); len(pk) != 0 {
				t.Fatalf("pages left after the downgrade: %v", pk)
			}
			checkSince("after the downgrade", mustLoad(t, cli, ks).Jobs)
		})
	}
}
