package runner

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The bounded output keeps exactly the first and last halves of whatever
// is written, in any chunking, and says how much it dropped.
func TestBoundedOutputProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(2, 64).Draw(t, "max")
		chunks := rapid.SliceOf(rapid.StringMatching(`[a-z]{0,40}`)).Draw(t, "chunks")
		b := newBoundedOutput(max)
		all := ""
		for _, c := range chunks {
			_, _ = b.Write([]byte(c))
			all += c
		}
		if len(all) <= max {
			if b.String() != all || b.truncated() {
				t.Fatalf("%q kept as %q", all, b.String())
			}
			return
		}
		head, tail := all[:max/2], all[len(all)-(max-max/2):]
		got := b.String()
		if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) || !b.truncated() {
			t.Fatalf("%q (max %d) kept as %q", all, max, got)
		}
		if !strings.Contains(got, "bytes dropped]") {
			t.Fatalf("no marker in %q", got)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"negative grace":  {KillGrace: -1},
		"negative output": {MaxOutputBytes: -1},
		"slow extend":     {ExtendEvery: time.Second},
		"empty argv0":     {Supervisor: []string{""}},
		"negative client": {ClientTimeout: -time.Second},
		"zero network":    {Egress: EgressPolicy{Deny: []netip.Prefix{{}}}},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New with %s: %v, want ErrInvalidConfig", name, err)
		}
	}
	rn, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	if rn.KillGrace() != DefaultKillGrace || rn.cfg.MaxOutputBytes != DefaultMaxOutputBytes || rn.cfg.Env == nil {
		t.Fatalf("defaults not applied: %+v", rn.cfg)
	}
}
