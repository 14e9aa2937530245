package etcdtest

import "go.uber.org/goleak"

// IgnoreEtcd lists goroutines that etcd's server and client libraries leave
// behind by design (package-level loggers and gRPC internals), for
// goleak.VerifyTestMain.
func IgnoreEtcd() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/pkg/v3/traceutil.init"),
		goleak.IgnoreAnyFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
	}
}

// IgnoreEtcdCluster is IgnoreEtcd plus what a multi-member cluster leaves
// behind: members forward lease requests to the leader over pooled HTTP
// connections (etcd's peer round tripper), which etcd never closes, and a
// stopped member's graceful peer shutdown gives up after a second on
// connections still in use. For packages that use StartCluster; it hides
// leaked net/http connection goroutines, so packages with HTTP code of their
// own should not use it.
func IgnoreEtcdCluster() []goleak.Option {
	return append(IgnoreEtcd(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}
