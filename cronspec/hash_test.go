package cronspec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	off := func(field, n int) int { return HashOffset("nightly-report", field, n) }
	tests := []struct{ spec, want string }{
		{"0 0 * * *", "0 0 * * *"},
		{"@hourly", "@hourly"},
		{"0 0 * * thu", "0 0 * * thu"},
		{"0 0 * * THU", "0 0 * * THU"},
		{"H * * * *", fmt.Sprintf("%d * * * *", off(1, 60))},
		{"H H * * * *", fmt.Sprintf("%d %d * * * *", off(0, 60), off(1, 60))},
		{"H H H * * *", fmt.Sprintf("%d %d %d * * *", off(0, 60), off(1, 60), off(2, 24))},
		{"0 0 H H H", fmt.Sprintf("0 0 %d %d %d", 1+off(3, 28), 1+off(4, 12), off(5, 7))},
		{"H(1-5) * * * *", fmt.Sprintf("%d * * * *", 1+off(1, 5))},
		{"H/15 * * * *", fmt.Sprintf("%d-59/15 * * * *", off(1, 15))},
		{"H(30-59)/10 * * * * *", fmt.Sprintf("%d-59/10 * * * * *", 30+off(0, 10))},
		{"0,H 9-17 * * mon-fri", fmt.Sprintf("0,%d 9-17 * * mon-fri", off(1, 60))},
		{"  H  2 * * *  ", fmt.Sprintf("%d 2 * * *", off(1, 60))},
	}
	for _, tc := range tests {
		got, err := Expand(tc.spec, "nightly-report")
		if err != nil || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
		if _, err := ParseJob(tc.spec, "Europe/Berlin", "nightly-report"); err != nil {
			t.Errorf("ParseJob(%q): %v", tc.spec, err)
		}
	}
}

func TestExpandRejects(t *testing.T) {
	tests := []struct{ spec, name, contains string }{
		{"H * * * *", "", "H needs the job's name"},
		{"H(5-1) * * * *", "j", "minute field \"H(5-1)\": H(5-1) must lie within 0-59"},
		{"H(0-60) * * * *", "j", "must lie within 0-59"},
		{"0 H(0-24) * * *", "j", "hour field"},
		{"0 0 H(0-5) * *", "j", "within 1-31"},
		{"0 0 * * H(0-7)", "j", "day of week field"},
		{"H(a-b) * * * *", "j", "want H(a-b) with whole numbers"},
		{"H(5) * * * *", "j", "want H(a-b)"},
		{"H(1-5 * * * *", "j", "without a closing parenthesis"},
		{"H/0 * * * *", "j", "from 1 to 60"},
		{"H/61 * * * *", "j", "from 1 to 60"},
		{"H(0-9)/11 * * * *", "j", "from 1 to 10"},
		{"H/x * * * *", "j", "step of H/x"},
		{"Hx * * * *", "j", "failed to parse"}, // not an H term: robfig's own error
		{"H-5 * * * *", "j", "failed to parse"},
		{"H5 * * * *", "j", "failed to parse"},
	}
	for _, tc := range tests {
		_, err := ParseJob(tc.spec, "", tc.name)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("ParseJob(%q, name %q) = %v; want ErrSpec containing %q", tc.spec, tc.name, err, tc.contains)
		}
	}
	// Parse alone has no name to hash.
	if _, err := Parse("H * * * *", ""); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "H needs the job's name") {
		t.Errorf("Parse with H: %v", err)
	}
}

// TestHashStable pins H for a few names: the offsets are part of the public
// contract (every replica, every restart, every release agrees), so a change
// in the hash or its input fails here.
func TestHashStable(t *testing.T) {
	pinned := map[string]string{}
	for _, name := range []string{"a", "nightly-report", "job-000001"} {
		got, err := Expand("H H H H H H", name)
		if err != nil {
			t.Fatal(err)
		}
		pinned[name] = got
		for range 3 { // the same name always gives the same offsets
			if again, _ := Expand("H H H H H H", name); again != got {
				t.Fatalf("Expand for %q: %q then %q", name, got, again)
			}
		}
	}
	want := map[string]string{
		"a":              "35 15 15 8 3 5",
		"nightly-report": "28 11 1 25 10 3",
		"job-000001":     "12 31 1 1 8 3",
	}
	for name, w := range want {
		if pinned[name] != w {
			t.Errorf("H H H H H H for %q = %q, pinned %q", name, pinned[name], w)
		}
	}
}

// TestHashSpread: 100,000 job names on "H H * * * *" fall into the hour's
// 3,600 seconds roughly uniformly (chi-square well under what a skewed hash
// gives), and the seconds and minutes are independent of each other.
func TestHashSpread(t *testing.T) {
	const jobs, slots = 100_000, 3600
	var count [slots]int
	for i := range jobs {
		name := fmt.Sprintf("job-%06d", i)
		s, err := ParseJob("H H * * * *", "UTC", name)
		if err != nil {
			t.Fatal(err)
		}
		at := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second))
		if at.Hour() != 0 {
			t.Fatalf("%s: first fire %v not in the first hour", name, at)
		}
		count[at.Minute()*60+at.Second()]++
	}
	exp := float64(jobs) / slots
	var chi2 float64
	maxc := 0
	for _, c := range count {
		d := float64(c) - exp
		chi2 += d * d / exp
		maxc = max(maxc, c)
	}
	// 3,599 degrees of freedom: mean 3,599, sd ~85; 4,000 is ~4.7 sd.
	if chi2 > 4000 {
		t.Errorf("chi-square %.0f over %d slots: not uniform", chi2, slots)
	}
	if maxc > 3*int(exp) {
		t.Errorf("busiest second holds %d jobs, expected about %.0f", maxc, exp)
	}
}

// TestHashedScheduleClass: H resolves to a number before the fixed-time test,
// so "H H * * *" is a fixed-time job (ISC cron rules across DST) and "H/15 *
// * * *" an interval job, like the specs they expand to.
func TestHashedScheduleClass(t *testing.T) {
	for sp, fixed := range map[string]bool{"H H * * *": true, "H/15 * * * *": false, "H * * * *": false, "0 H/2 * * *": false} {
		s, err := ParseJob(sp, "America/New_York", "x")
		if err != nil {
			t.Fatal(err)
		}
		if got := s.(*spec).fixed; got != fixed {
			t.Errorf("%q: fixed %v, want %v", sp, got, fixed)
		}
	}
}

func TestEveryIgnoresName(t *testing.T) {
	a, _ := ParseJob("@every 7m13s", "UTC", "one")
	b, _ := ParseJob("@every 7m13s", "UTC", "two")
	at := mustTime(t, "2026-05-01T12:00:00Z")
	if !a.Next(at).Equal(b.Next(at)) || a.Next(at).Unix()%(7*60+13) != 0 {
		t.Fatalf("@every moved with the job name: %v vs %v", a.Next(at), b.Next(at))
	}
}
