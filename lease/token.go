package lease

import (
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
)

// Token is the fencing token of one shard lease: the shard and the
// generation, which is the CreateRevision of the shard's lease key when it
// was acquired. etcd's revision is global and monotonic, so every later
// acquisition of a shard gets a strictly larger generation. Outside this
// package the generation is called the token.
type Token struct {
	Shard      int
	Generation int64
}

// String is the generation in decimal, as runs carry it
// (Shardcron-Fencing-Token).
func (t Token) String() string { return strconv.FormatInt(t.Generation, 10) }

// Guard returns the comparison that holds exactly while the token's
// acquisition of the shard is still in force: CreateRevision(shard key) ==
// generation. Every write an owner makes for the shard puts it in the
// transaction's If. Once the shard key is deleted (released, or its lease
// expired) no key can ever again have that CreateRevision, so the guard
// stays false for good.
func Guard(ks keyspace.Space, t Token) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(ks.Shard(t.Shard)), "=", t.Generation)
}
