package keyspace

import (
	"strconv"
	"strings"
)

// Operators' requests live in keys of their own, apart from the per-fire
// records:
//
//	triggers/<shard, zero-padded>/<job>/<id>   a request to run job once now
//	own/drain/<node>                            node takes no shard until the key goes
//
// A trigger request is created once by `shardcron trigger` (or the API) and
// deleted once: by the shard's owner in the fenced transaction that claims
// it, by the owner when it expires, or by the client withdrawing it. Every
// replica watches triggers/ (requests are rare) and acts only on those of
// shards it holds. Drain flags sit under own/, so the watch on own/ that
// every replica keeps anyway sees them; they have no lease, so a drained
// node stays drained across restarts until `undrain` deletes the key.

// Triggers is the prefix of every trigger request.
func (s Space) Triggers() string { return s.root + "triggers/" }

// ShardTriggers is the prefix of shard's trigger requests.
func (s Space) ShardTriggers(shard int) string { return s.Triggers() + pad(shard) + "/" }

// Trigger is the key of one request to run job now; id is unique (the
// client picks it at random) and holds no "/".
func (s Space) Trigger(shard int, job, id string) string {
	return s.ShardTriggers(shard) + job + "/" + id
}

// TriggerFromKey parses a trigger request key.
func (s Space) TriggerFromKey(key string) (shard int, job, id string, ok bool) {
	rest, found := strings.CutPrefix(key, s.Triggers())
	if !found || len(rest) < shardWidth+4 || rest[shardWidth] != '/' {
		return 0, "", "", false
	}
	n, err := strconv.Atoi(rest[:shardWidth])
	if err != nil || n < 0 {
		return 0, "", "", false
	}
	job, id, found = strings.Cut(rest[shardWidth+1:], "/")
	if !found || job == "" || id == "" || strings.Contains(id, "/") {
		return 0, "", "", false
	}
	return n, job, id, true
}

// Drains is the prefix of drain flags.
func (s Space) Drains() string { return s.root + "own/drain/" }

// Drain is the drain flag of node.
func (s Space) Drain(node string) string { return s.Drains() + node }

// DrainFromKey returns the node of a drain flag key.
func (s Space) DrainFromKey(key string) (string, bool) {
	node, ok := strings.CutPrefix(key, s.Drains())
	return node, ok && node != "" && !strings.Contains(node, "/")
}
