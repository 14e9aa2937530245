package jobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoreEtcd()...) }

// job returns a valid job; gen marks which applied set it belongs to.
func job(name string, gen int) config.Job {
	return config.Job{
		Name:     name,
		Schedule: "*/10 * * * * *",
		Timezone: "UTC",
		// A hashed path segment and header keep the data from compressing
		// unrealistically well, so stored sizes mean something.
		HTTP: &config.HTTPTarget{
			URL:     fmt.Sprintf("http://billing.internal/gen-%d/%s/%016x", gen, name, xxhash.Sum64String(fmt.Sprint(name, gen))),
			Method:  "POST",
			Headers: map[string]string{"Authorization": "Bearer ${SHARDCRON_JOB_BILLING_TOKEN}", "X-Tenant": fmt.Sprintf("%08x", xxhash.Sum64String(name))},
		},
		Timeout:          config.Duration(30 * time.Second),
		Concurrency:      config.ConcurrencyForbid,
		Misfire:          config.MisfireRunOnce,
		StartingDeadline: config.Duration(5 * time.Minute),
	}
}

// jobs returns n jobs named job-<i> for i in [from, from+n).
func jobs(from, n, gen int) []config.Job {
	out := make([]config.Job, n)
	for i := range out {
		out[i] = job(fmt.Sprintf("job-%07d", from+i), gen)
	}
	return out
}

// fingerprint identifies a set by its definitions (not Since, not order).
func fingerprint(js []config.Job) string {
	specs := make([]string, len(js))
	for i := range js {
		specs[i] = string(specOf(&js[i]))
	}
	sort.Strings(specs)
	h := sha256.New()
	for _, s := range specs {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%d:%s", len(js), hex.EncodeToString(h.Sum(nil))[:16])
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// versions lists the job set versions stored under jobs/sets/.
func versions(t testing.TB, cli *clientv3.Client, ks keyspace.Space) []string {
	t.Helper()
	resp, err := cli.Get(testCtx(t, 30*time.Second), ks.JobSets(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("list versions: %v", err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		v, _, _ := strings.Cut(string(kv.Key)[len(ks.JobSets()):], "/")
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

func wantVersions(t testing.TB, cli *clientv3.Client, ks keyspace.Space, want ...int64) {
	t.Helper()
	var ws []string
	for _, v := range want {
		ws = append(ws, fmt.Sprintf("%020d", v))
	}
	got := versions(t, cli, ks)
	if fmt.Sprint(got) != fmt.Sprint(ws) {
		t.Fatalf("stored versions = %v, want %v", got, ws)
	}
}

func exists(t testing.TB, cli *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := cli.Get(testCtx(t, 10*time.Second), key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return resp.Count > 0
}

func dbSize(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	st, err := cli.Status(testCtx(t, 10*time.Second), cli.Endpoints()[0])
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st.DbSize
}

// clock returns a Now that the test advances.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func mustApply(t testing.TB, cli *clientv3.Client, ks keyspace.Space, js []config.Job, opts ApplyOptions) Result {
	t.Helper()
	d := 2 * time.Minute
	if _, ok := t.(*testing.B); ok {
		d = 15 * time.Minute // a million jobs on a shared, loaded machine
	}
	res, err := Apply(testCtx(t, d), cli, ks, js, opts)
	if err != nil {
		t.Fatalf("apply %d jobs: %v", len(js), err)
	}
	if res.GCErr != nil {
		t.Fatalf("apply %d jobs: gc: %v", len(js), res.GCErr)
	}
	return res
}

func mustLoad(t testing.TB, cli *clientv3.Client, ks keyspace.Space) config.JobSet {
	t.Helper()
	set, err := Load(testCtx(t, time.Minute), cli, ks)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return set
}

func byName(js []config.Job) map[string]config.Job {
	m := make(map[string]config.Job, len(js))
	for _, j := range js {
		m[j.Name] = j
	}
	return m
}

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, cancel
}
