package lease

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		bad  string // substring of the error; "" means valid
	}{
		{"defaults", DefaultConfig(), ""},
		{"zero takes defaults", Config{}, ""},
		{"short ttl", Config{TTL: 2 * time.Second}, ""},
		{"ttl below minimum", Config{TTL: 1500 * time.Millisecond, Margin: 500 * time.Millisecond}, "below the minimum"},
		{"margin half the ttl", Config{TTL: 2 * time.Second, Margin: time.Second}, ""},
		{"margin above half the ttl", Config{TTL: 3 * time.Second, Margin: 1600 * time.Millisecond}, "exceeds half the TTL"},
		{"negative margin", Config{Margin: -time.Second}, "negative"},
		{"negative election timeout", Config{ElectionTimeout: -time.Second}, "negative"},
		{"txn ops too small", Config{MaxTxnOps: 1}, "MaxTxnOps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.bad) || !strings.HasPrefix(err.Error(), "lease: ") {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig mentioning %q", err, tc.bad)
			}
		})
	}
}

func TestConfigShortTTLAndCadence(t *testing.T) {
	if !(Config{TTL: 3 * time.Second}).ShortTTL() {
		t.Error("3s TTL with a 1s election timeout is short")
	}
	if (Config{TTL: 10 * time.Second}).ShortTTL() {
		t.Error("10s TTL with a 1s election timeout is not short")
	}
	if got := (Config{TTL: 2500 * time.Millisecond}).grantSeconds(); got != 3 {
		t.Errorf("grantSeconds(2.5s) = %d, want 3 (rounded up)", got)
	}
	c := cadenceFor(3 * time.Second)
	if c.every != time.Second || c.attempt != 500*time.Millisecond || c.retry != 300*time.Millisecond {
		t.Errorf("cadence(3s) = %+v", c)
	}
}

func TestMarkerRoundTripAndFormat(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 123, time.FixedZone("x", 3600))
	m, err := ParseMarker(Marker{StoppedAt: at, Generation: 42}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !m.StoppedAt.Equal(at) || m.Generation != 42 || m.Format != MarkerFormat {
		t.Fatalf("round trip: %+v", m)
	}
	for _, tc := range []struct{ in, bad string }{
		{`{"format":2,"stopped_at":"2026-01-01T00:00:00Z","generation":1}`, "newer"},
		{`{"stopped_at":"2026-01-01T00:00:00Z","generation":1}`, "no format"},
		{`{"format":1,"generation":1}`, "no stopped_at"},
		{`not json`, "released marker"},
	} {
		_, err := ParseMarker([]byte(tc.in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("ParseMarker(%s) = %v, want ErrInvalid mentioning %q", tc.in, err, tc.bad)
		}
	}
}
