// Package etcdstatus exports the etcd database's size against its space
// quota as Prometheus metrics, so the headroom before etcd raises NOSPACE
// (and refuses every write, every fire) can be watched and alerted on.
//
// The values come from etcd's maintenance Status call, made for each
// endpoint when the registry is scraped (bounded by a timeout): the
// database file's size (what the quota is checked against), the part of it
// in use (what a defragmentation would leave), and the quota the server
// itself enforces (etcd 3.6 and later report it). Status needs an
// authenticated user, not the root role. An endpoint that does not answer
// shows as shardcron_etcd_status_up 0 and no size.
package etcdstatus

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultTimeout bounds the Status calls of one scrape.
const DefaultTimeout = 2 * time.Second

// Statuser is the part of the etcd client the collector uses.
type Statuser interface {
	Endpoints() []string
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

// Collector is a prometheus.Collector of the etcd database's size and
// quota per endpoint. It is safe for concurrent scrapes.
type Collector struct {
	cli                   Statuser
	timeout               time.Duration
	up, size, inUse, quot *prometheus.Desc
}

// NewCollector returns a collector reading cli's endpoints.
func NewCollector(cli Statuser) *Collector {
	l := []string{"endpoint"}
	return &Collector{
		cli:     cli,
		timeout: DefaultTimeout,
		up:      prometheus.NewDesc("shardcron_etcd_status_up", "1 when the etcd endpoint answered the Status call of this scrape, else 0.", l, nil),
		size:    prometheus.NewDesc("shardcron_etcd_db_size_bytes", "Size of the etcd database file; etcd raises NOSPACE when it reaches shardcron_etcd_db_quota_bytes.", l, nil),
		inUse:   prometheus.NewDesc("shardcron_etcd_db_size_in_use_bytes", "Part of the etcd database file in use: what a defragmentation would leave.", l, nil),
		quot:    prometheus.NewDesc("shardcron_etcd_db_quota_bytes", "The etcd server's space quota (--quota-backend-bytes) as it reports it.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.size
	ch <- c.inUse
	ch <- c.quot
}

// Collect implements prometheus.Collector: one Status call per endpoint,
// each bounded by the timeout so that one dead endpoint does not hide the
// others.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, ep := range c.cli.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		resp, err := c.cli.Status(ctx, ep)
		cancel()
		if err != nil {
			ch <- gauge(c.up, 0, ep)
			continue
		}
		ch <- gauge(c.up, 1, ep)
		ch <- gauge(c.size, float64(resp.DbSize), ep)
		ch <- gauge(c.inUse, float64(resp.DbSizeInUse), ep)
		if resp.DbSizeQuota > 0 {
			ch <- gauge(c.quot, float64(resp.DbSizeQuota), ep)
		}
	}
}

// gauge is a constant gauge, or an invalid metric (a scrape error, not a
// panic) if the label value is not valid UTF-8.
func gauge(d *prometheus.Desc, v float64, endpoint string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, endpoint)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
