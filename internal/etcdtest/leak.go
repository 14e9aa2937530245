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
