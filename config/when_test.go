package config

import (
	"testing"
	"time"
)

// TestFinishedJobsAreValid: a job whose end_at or at has passed is kept,
// not refused: it is listed as finished.
func TestFinishedJobsAreValid(t *testing.T) {
	jobs, err := ParseJobs("jobs.yaml", []byte(`jobs:
  - {name: ended, schedule: "@hourly", start_at: 2020-01-01T00:00:00Z, end_at: 2020-02-01T00:00:00Z, exec: {command: [x]}}
  - {name: once-long-ago, at: 2020-01-01T00:00:00Z, exec: {command: [x]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, j := range jobs {
		s, err := j.Fires()
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Next(now); !n.IsZero() {
			t.Errorf("%s: next fire %v, want none", j.Name, n)
		}
	}
}

// TestFiresCountsMaxRunsFromSince: max_runs keeps the first ticks after
// the job's first apply.
func TestFiresCountsMaxRunsFromSince(t *testing.T) {
	j := Job{Name: "a", Schedule: "@every 1m", MaxRuns: 2, Since: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}
	s, err := j.Fires()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := []time.Time{from.Add(time.Minute), from.Add(2 * time.Minute)}
	for i, x := range []time.Time{s.Next(from), s.Next(want[0]), s.Next(want[1])} {
		if i < 2 && !x.Equal(want[i]) || i == 2 && !x.IsZero() {
			t.Fatalf("fire %d: %v", i, x)
		}
	}
	j.Since = from.Add(time.Hour)
	o, _ := j.Fires()
	if got := o.Next(from); !got.Equal(from.Add(61 * time.Minute)) {
		t.Errorf("applied an hour later: first fire %v, want an hour later", got)
	}
}

// TestOneShotExportsBack: export's JSON form of a one-shot job (an empty
// schedule beside at) parses back to the same job.
func TestOneShotExportsBack(t *testing.T) {
	jobs, err := ParseJobs("jobs.yaml", []byte("jobs:\n  - {name: once, at: 2026-12-24T18:00:00Z, jitter: 10s, exec: {command: [x]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalJobsJSON(jobs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJobs("export.json", b)
	if err != nil || len(back) != 1 || !back[0].At.Equal(jobs[0].At) || back[0].Jitter != jobs[0].Jitter {
		t.Fatalf("back: %+v, %v\n%s", back, err, b)
	}
}
