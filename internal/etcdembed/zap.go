package etcdembed

import (
	"os"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// nopZap silences the etcd client this package uses for maintenance.
var nopZap = zap.NewNop()

// newServerLogger is etcd's own logger: JSON on stderr at level, silent
// once closing is set, because an orderly Close makes every listener of
// etcd's report "serving failed" at error level.
func newServerLogger(level string, closing *atomic.Bool) (*zap.Logger, error) {
	lv, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lv)
	return zap.New(quietCore{core, closing}), nil
}

type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{c.Core.With(fields), c.closing}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() {
		return ce
	}
	return c.Core.Check(e, ce)
}
