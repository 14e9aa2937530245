package etcdembed

import "go.uber.org/zap"

// nopZap silences the etcd client this package uses for maintenance.
var nopZap = zap.NewNop()
