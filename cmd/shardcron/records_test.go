package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
)

// TestReadRecordsOneRevision: a page of records larger than one
// transaction is still read as of one revision, so a page never mixes
// states of the records (a write landing between the transactions is
// either wholly in the page or wholly out of it).
func TestReadRecordsOneRevision(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 300 // more than one transaction's 128 operations
	key := func(i int) string { return fmt.Sprintf("/records-test/%03d", i) }
	var ops []clientv3.Op
	for i := range n {
		if _, err := cli.Put(ctx, key(i), "v1"); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, clientv3.OpGet(key(i)))
	}
	// Between the first transaction and the next, the first and the last
	// record change together, in one transaction.
	testHookAfterRecordsTxn = func() {
		testHookAfterRecordsTxn = nil
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut(key(0), "v2"), clientv3.OpPut(key(n-1), "v2")).Commit(); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookAfterRecordsTxn = nil }()
	records, err := readRecords(ctx, cli, ops)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != n {
		t.Fatalf("%d records, want %d", len(records), n)
	}
	if first, last := string(records[0]), string(records[n-1]); first != last {
		t.Errorf("one page mixes revisions: first record %q, last %q (written together)", first, last)
	}
}
