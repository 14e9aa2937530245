package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// ReadRecords reads a page larger than one transaction as of one revision,
// so a page never mixes states of the records (a write landing between the
// transactions is either wholly in the page or wholly out of it), and gives
// nil for a record that does not exist.
func TestReadRecordsOneRevision(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspaceFor("records")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 300 // more than one transaction's MaxTxnOps
	var refs []RecordRef
	for i := range n {
		r := RecordRef{Shard: i % 7, Job: fmt.Sprintf("job-%03d", i)}
		refs = append(refs, r)
		if _, err := cli.Put(ctx, ks.Tick(r.Shard, r.Job), "v1"); err != nil {
			t.Fatal(err)
		}
	}
	refs = append(refs, RecordRef{Shard: 1, Job: "absent"})
	first, last := ks.Tick(refs[0].Shard, refs[0].Job), ks.Tick(refs[n-1].Shard, refs[n-1].Job)
	// Between the first transaction and the next, the first and the last
	// record change together, in one transaction.
	testHookAfterRecordsTxn = func() {
		testHookAfterRecordsTxn = nil
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut(first, "v2"), clientv3.OpPut(last, "v2")).Commit(); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookAfterRecordsTxn = nil }()
	records, err := ReadRecords(ctx, cli, ks, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != n+1 {
		t.Fatalf("%d records, want %d", len(records), n+1)
	}
	if a, b := string(records[0]), string(records[n-1]); a != b {
		t.Errorf("one page mixes revisions: first record %q, last %q (written together)", a, b)
	}
	if records[n] != nil {
		t.Errorf("absent record = %q, want nil", records[n])
	}
}
