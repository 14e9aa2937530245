package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseJobsDefaults(t *testing.T) {
	jobs, err := ParseJobs("jobs.yaml", []byte(`jobs:
  - name: a
    schedule: "@hourly"
    http: {url: "http://x.internal/"}
  - name: b
    schedule: "0 9 * * *"
    exec: {command: [/bin/true]}
    starting_deadline: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Name: "a", Schedule: "@hourly", Timezone: "UTC", HTTP: &HTTPTarget{URL: "http://x.internal/", Method: "POST"},
			Timeout: Duration(time.Minute), Concurrency: ConcurrencyForbid, Misfire: MisfireRunOnce},
		{Name: "b", Schedule: "0 9 * * *", Timezone: "UTC", Exec: &ExecTarget{Command: []string{"/bin/true"}},
			Timeout: Duration(time.Minute), Concurrency: ConcurrencyForbid, Misfire: MisfireRunOnce},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got  %+v\nwant %+v", jobs, want)
	}
}

// TestJobJSONRoundTrip: the job store keeps jobs as JSON; a parsed job must
// come back equal, and still valid.
func TestJobJSONRoundTrip(t *testing.T) {
	jobs, err := LoadJobs("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs[0].Since = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	var back []Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jobs, back) {
		t.Fatalf("JSON round trip changed the jobs:\n%s", b)
	}
	for _, j := range back {
		if err := j.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestJobValidate(t *testing.T) {
	j := Job{Name: "x", Schedule: "@daily", Func: "f"}
	j.SetDefaults()
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	j.Misfire = "later"
	j.Timeout = 0
	err := j.Validate()
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 || !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v", err)
	}
	if got := errs.Error(); got != "job \"x\": field \"timeout\": must be more than 0\njob \"x\": field \"misfire\": must be one of skip, run_once, run_all" {
		t.Fatalf("got %q", got)
	}
}

// TestLinesOfNestedFields: a problem deep in a job points at its own line,
// not the job's.
func TestLinesOfNestedFields(t *testing.T) {
	_, err := ParseJobs("j.yaml", []byte(`jobs:
  - name: a
    schedule: "@hourly"
    http:
      url: "http://x.internal/"
      headers:
        X-Ok: fine
        X-Bad: "${PATH}"
      expect_status:
        - 200
        - 700
`))
	want := "j.yaml:8: job \"a\": field \"http.headers.X-Bad\": ${PATH} is not allowed: only variables named SHARDCRON_JOB_* are expanded\n" +
		"j.yaml:11: job \"a\": field \"http.expect_status[1]\": 700 is not an HTTP status (100 to 599)"
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestMarshalJobsEmpty(t *testing.T) {
	out, err := MarshalJobs(nil)
	if err != nil || string(out) != "jobs: []\n" {
		t.Fatalf("%q %v", out, err)
	}
	jobs, err := ParseJobs("e.yaml", out)
	if err != nil || len(jobs) != 0 {
		t.Fatal(jobs, err)
	}
}

func TestLoadJobsUnreadable(t *testing.T) {
	dir := t.TempDir()
	for path, want := range map[string]string{
		dir + "/missing.yaml": dir + "/missing.yaml: no such file or directory",
		dir:                   dir + ": is a directory",
	} {
		if _, err := LoadJobs(path); err == nil || err.Error() != want || !errors.Is(err, ErrInvalid) {
			t.Errorf("LoadJobs(%q) = %v, want %q", path, err, want)
		}
	}
}

// TestExamplesParse: the repository's example jobs file stays valid.
func TestExamplesParse(t *testing.T) {
	jobs, err := LoadJobs("../examples/jobs.yaml")
	if err != nil || len(jobs) == 0 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
}

// The file's units (jobs plus items) are capped: the job whose items pass
// MaxUnits is named, once.
func TestParseJobsCapsUnits(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	n := MaxUnits/MaxItems + 1
	for i := range n {
		fmt.Fprintf(&b, "  - name: j%d\n    schedule: \"@hourly\"\n    items: %d\n    exec: {command: [/bin/true]}\n", i, MaxItems)
	}
	_, err := ParseJobs("big.yaml", []byte(b.String()))
	want := fmt.Sprintf("big.yaml:%d: job \"j%d\": field \"items\": with this job's items the file has %d units", 4*(n-1)+4, n-1, n*MaxItems)
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "more than the limit") != 1 {
		t.Fatalf("ParseJobs of %d jobs of %d items: %v\nwant one error starting %q", n, MaxItems, err, want)
	}
}
