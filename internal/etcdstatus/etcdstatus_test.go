package etcdstatus

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

// gather collects c and returns each series' value by name and endpoint.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()+"|"+label(m, "endpoint")] = m.GetGauge().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Against a real etcd with a 256 MiB quota: the quota as the server reports
// it, the file size and the part in use (at most the size), and an
// endpoint that does not answer shows as down without hiding the live one.
func TestCollectorReadsSizeAndQuota(t *testing.T) {
	srv := etcdtest.Start(t)
	dead, err := etcdembed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead
	cli := etcdtest.NewClient(t, deadURL, srv.Endpoint())
	ctx := t.Context()
	if _, err := cli.Put(ctx, "k", strings.Repeat("x", 64<<10)); err != nil {
		t.Fatal(err)
	}
	c := NewCollector(cli)
	c.timeout = time.Second
	got := gather(t, c)
	live := srv.Endpoint()
	if got["shardcron_etcd_status_up|"+live] != 1 || got["shardcron_etcd_db_quota_bytes|"+live] != 256<<20 {
		t.Errorf("live endpoint: %v", got)
	}
	size, inUse := got["shardcron_etcd_db_size_bytes|"+live], got["shardcron_etcd_db_size_in_use_bytes|"+live]
	if size < 64<<10 || inUse <= 0 || inUse > size {
		t.Errorf("size %v, in use %v: want a file holding the 64 KiB value, in use within it", size, inUse)
	}
	if v, ok := got["shardcron_etcd_status_up|"+deadURL]; !ok || v != 0 {
		t.Errorf("dead endpoint: up %v (present %v), want 0", v, ok)
	}
	if _, ok := got["shardcron_etcd_db_size_bytes|"+deadURL]; ok {
		t.Errorf("dead endpoint reports a size: %v", got)
	}
}
