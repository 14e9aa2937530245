package config

import (
	"testing"
	"time"
)

// The backoff doubles from the first retry on and never exceeds MaxBackoff.
func TestRetriesDelay(t *testing.T) {
	r := &Retries{Attempts: 5, Backoff: Duration(time.Second)}
	for n, want := range map[int]time.Duration{2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second, 5: 8 * time.Second} {
		if got := r.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	r = &Retries{Attempts: 10, Backoff: Duration(40 * time.Minute)}
	if got := r.Delay(10); got != MaxBackoff {
		t.Errorf("Delay(10) = %v, want the cap %v", got, MaxBackoff)
	}
}

// Retries given without a backoff wait the default; without retries a job
// has none.
func TestRetriesDefaults(t *testing.T) {
	jobs, err := ParseJobs("r.yaml", []byte("jobs:\n  - {name: a, schedule: \"@hourly\", func: f, retries: {attempts: 3}}\n  - {name: b, schedule: \"@hourly\", func: f}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := jobs[0].Retries; r == nil || r.Attempts != 3 || r.Backoff.D() != DefaultBackoff {
		t.Errorf("a: retries %+v", r)
	}
	if jobs[1].Retries != nil {
		t.Errorf("b: retries %+v, want none", jobs[1].Retries)
	}
}
