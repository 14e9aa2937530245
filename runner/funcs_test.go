package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

func TestFuncsRegister(t *testing.T) {
	var f Funcs
	ok := func(context.Context) error { return nil }
	if err := f.Register("a", ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func(context.Context) error
	}{{"a", ok}, {"", ok}, {"b", nil}} {
		if err := f.Register(c.name, c.fn); !errors.Is(err, ErrFunc) {
			t.Errorf("Register(%q): %v, want ErrFunc", c.name, err)
		}
	}
}

// The handler's context carries the run's identity and is cancelled on
// loss.
func TestFuncIdentityAndLoss(t *testing.T) {
	var funcs Funcs
	started := make(chan scheduler.Run, 1)
	_ = funcs.Register("block", func(ctx context.Context) error {
		id, _ := IdentityFrom(ctx)
		started <- id
		<-ctx.Done()
		return context.Cause(ctx)
	})
	_ = funcs.Register("fail", func(context.Context) error { return errors.New("no invoices") })
	_ = funcs.Register("panic", func(context.Context) error { panic("bad handler") })
	rn := newRunner(t, func(c *Config) { c.Funcs = &funcs })

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	resc := make(chan scheduler.Result, 1)
	r := testRun(config.Job{Name: "in-proc", Func: "block"}, slidingDeadline{time.Minute})
	go func() { resc <- rn.Run(ctx, r) }()
	id := <-started
	if id.Cluster != r.Cluster || id.Job.Name != "in-proc" || !id.Tick.Equal(r.Tick) || id.Token != r.Token ||
		id.Shard != r.Shard || id.Node != r.Node {
		t.Fatalf("identity %+v", id)
	}
	lost := time.Now()
	cancel(scheduler.ErrShardLost)
	res := <-resc
	t.Logf("loss -> handler returned: %v", time.Since(lost).Round(time.Microsecond))
	if res.Status != scheduler.StatusCancelled || !strings.HasPrefix(res.Detail, "shard lost") {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	if _, ok := IdentityFrom(context.Background()); ok {
		t.Fatal("identity in a plain context")
	}

	for name, want := range map[string]string{"fail": "no invoices", "panic": "handler panicked: bad handler", "nope": `no in-process handler registered as "nope"`} {
		res := rn.Run(context.Background(), testRun(config.Job{Name: name, Func: name}, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.HasPrefix(res.Detail, want) {
			t.Errorf("%s: status %s (%s)", name, res.Status, res.Detail)
		}
	}
}
