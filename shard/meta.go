package shard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/keyspace"
	"github.com/shardcron/shardcron/rebalance"
)

// MetaFormat is the format version of the cluster's meta key that this
// package writes and the newest it reads.
const MetaFormat = 1

// Meta is the cluster's meta key: S and the ring parameters, written once
// when the cluster is created and obeyed by every replica from then on.
// Changing S is a migration, never a flag.
type Meta struct {
	// Format is the meta format version (MetaFormat when written).
	Format int `json:"format"`
	// Shards is S.
	Shards int `json:"shards"`
	// LoadFactor, ReplicationFactor and HashVersion are the ring's
	// parameters (rebalance.Params).
	LoadFactor        float64 `json:"load_factor"`
	ReplicationFactor int     `json:"replication_factor"`
	HashVersion       string  `json:"hash_version"`
	// Epoch identifies this incarnation of the cluster: a random id chosen
	// when meta is created. A cluster wiped and recreated under the same
	// name gets a new epoch.
	Epoch string `json:"epoch"`
	// Created is when meta was written.
	Created time.Time `json:"created"`
}

// DefaultMeta returns the meta a new cluster of shards shards is created
// with (the default ring parameters, a fresh epoch).
func DefaultMeta(shards int) Meta {
	p := rebalance.Default(shards)
	return Meta{
		Format:            MetaFormat,
		Shards:            p.Shards,
		LoadFactor:        p.LoadFactor,
		ReplicationFactor: p.ReplicationFactor,
		HashVersion:       p.HashVersion,
	}
}

// Params returns the ring parameters.
func (m Meta) Params() rebalance.Params {
	return rebalance.Params{
		Shards:            m.Shards,
		LoadFactor:        m.LoadFactor,
		ReplicationFactor: m.ReplicationFactor,
		HashVersion:       m.HashVersion,
	}
}

// Validate checks the format version and the ring parameters.
func (m Meta) Validate() error {
	switch {
	case m.Format > MetaFormat:
		return fmt.Errorf("%w: cluster meta has format %d, newer than %d which this version of shardcron reads; upgrade this replica", ErrFormat, m.Format, MetaFormat)
	case m.Format < 1:
		return fmt.Errorf("%w: cluster meta has no format version", ErrFormat)
	}
	if err := m.Params().Validate(); err != nil {
		return fmt.Errorf("%w: cluster meta: %w", ErrFormat, err)
	}
	return nil
}

// sameRing reports whether two metas describe the same ring.
func (m Meta) sameRing(o Meta) bool {
	return m.Params() == o.Params()
}

// EnsureMeta returns the cluster's meta, creating it from want (by a
// compare-and-swap on its absence) when the cluster has none. When meta
// exists, the stored value wins: a replica started with other ring
// parameters logs that it follows meta (on log; nil discards). A stored
// meta in a newer format than this build reads, or with parameters this
// build cannot serve, is refused with ErrFormat. A zero want.Format or
// empty Epoch is filled in.
func EnsureMeta(ctx context.Context, cli *clientv3.Client, ks keyspace.Space, want Meta, log *slog.Logger) (Meta, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if want.Format == 0 {
		want.Format = MetaFormat
	}
	if want.Epoch == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		want.Epoch = hex.EncodeToString(b[:])
	}
	if want.Created.IsZero() {
		want.Created = time.Now().UTC().Truncate(time.Millisecond)
	}
	if err := want.Validate(); err != nil {
		return Meta{}, err
	}
	val, err := json.Marshal(want)
	if err != nil {
		return Meta{}, fmt.Errorf("shard: encode meta: %w", err)
	}
	key := ks.Meta()
	// Created only in a cluster with no member: with replicas running, a
	// missing meta was deleted, and they re-create it as it was
	// (metaguard.go); a new one with this replica's parameters could split
	// the job-to-shard mapping.
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(ks.Members()), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key), clientv3.OpGet(ks.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(3))).
		Commit()
	if err != nil {
		return Meta{}, fmt.Errorf("shard: create meta %s: %w", key, err)
	}
	if resp.Succeeded {
		log.Info("created cluster meta", "shards", want.Shards, "load_factor", want.LoadFactor,
			"replication_factor", want.ReplicationFactor, "hash_version", want.HashVersion, "epoch", want.Epoch)
		return want, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		var names []string
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			names = append(names, string(kv.Key))
		}
		return Meta{}, fmt.Errorf("%w: %s is missing while members are registered (%s): a running replica re-creates it as it was within its resync", ErrNoMeta, key, strings.Join(names, ", "))
	}
	var got Meta
	if err := json.Unmarshal(kvs[0].Value, &got); err != nil {
		return Meta{}, fmt.Errorf("%w: cluster meta %s: %v", ErrFormat, key, err)
	}
	if err := got.Validate(); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", key, err)
	}
	if v := kvs[0].Version; v > 1 {
		// Written once by the CAS above and never again (metaguard.go).
		return Meta{}, fmt.Errorf("%w: cluster meta %s was rewritten after its creation (etcd version %d): following it could split the job-to-shard mapping with replicas started before; delete the key and a running replica re-creates it as it was (or, with no replica running, the next one creates a new one)", ErrFormat, key, v)
	}
	switch {
	case got.Shards != want.Shards:
		log.Warn("cluster meta differs from this replica's settings; following meta",
			"shards", got.Shards, "wanted_shards", want.Shards,
			"load_factor", got.LoadFactor, "wanted_load_factor", want.LoadFactor,
			"replication_factor", got.ReplicationFactor, "wanted_replication_factor", want.ReplicationFactor,
			"hash_version", got.HashVersion, "epoch", got.Epoch)
	case !got.sameRing(want):
		// No setting chooses the ring's parameters: a cluster created by an
		// earlier release keeps that release's defaults, as it must.
		log.Info("cluster meta keeps the ring it was created with; following meta",
			"load_factor", got.LoadFactor, "replication_factor", got.ReplicationFactor,
			"hash_version", got.HashVersion, "epoch", got.Epoch)
	}
	return got, nil
}
