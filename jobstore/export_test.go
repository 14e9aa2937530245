package jobstore

import (
	"os"
	"testing"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// The contract's round trip: a parsed jobs file applied, exported with
// config.MarshalJobs and applied again, changes nothing.
func TestExportedSetReappliesUnchanged(t *testing.T) {
	data, err := os.ReadFile("../examples/jobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := config.ParseJobs("examples/jobs.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed) == 0 {
		t.Fatal("examples/jobs.yaml has no jobs")
	}
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("export")
	first := mustApply(t, cli, ks, parsed, ApplyOptions{})

	exported, err := config.MarshalJobs(mustLoad(t, cli, ks).Jobs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.ParseJobs("export.yaml", exported)
	if err != nil {
		t.Fatalf("the exported file does not parse: %v\n%s", err, exported)
	}
	res := mustApply(t, cli, ks, again, ApplyOptions{})
	if res.Applied || res.Version != first.Version || !res.Diff.Empty() {
		t.Fatalf("re-applying the export = %+v\n%s", res, exported)
	}
}
