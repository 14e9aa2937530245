package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shardcron/shardcron/cronspec"
)

var update = flag.Bool("update", false, "rewrite the golden files: testdata/bad/*.err from the current messages, jobs.schema.json from the Go types")

// TestBadFiles is the catalogue of rejected jobs files: each
// testdata/bad/NAME.yaml must fail with exactly the text of NAME.err (every
// problem, one per line, in file order), return no jobs, and wrap
// ErrInvalid. Regenerate the goldens with `go test ./config -run
// TestBadFiles -update` and read the diff.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("the catalogue holds %d bad files, want at least 30", len(files))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := ParseJobs(name, data)
			if err == nil {
				t.Fatalf("accepted: %+v", jobs)
			}
			if jobs != nil {
				t.Errorf("returned %d jobs with the error", len(jobs))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(path, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("no golden (run with -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("error text differs from %s:\n got: %s\nwant: %s", golden, got, want)
			}
		})
	}
}

func TestBadFileCauses(t *testing.T) {
	for file, cause := range map[string]error{
		"never-fires-feb-30.yaml": cronspec.ErrNeverFires,
		"tz-prefix-empty.yaml":    cronspec.ErrSpec,
		"bad-timezone.yaml":       cronspec.ErrTimezone,
		"other-variable.yaml":     ErrVariableNotAllowed,
	} {
		data, err := os.ReadFile(filepath.Join("testdata/bad", file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseJobs(file, data); !errors.Is(err, cause) {
			t.Errorf("%s: %v does not wrap %v", file, err, cause)
		}
	}
}

// TestHugeFile: past the size limit the file is refused before parsing,
// read through LoadJobs (which reads no more than the limit) or given as
// bytes. The limit is lowered to 1 MiB: MaxFileSize is 512 MiB.
func TestHugeFile(t *testing.T) {
	lowerLimit(t, &maxFileSize, 1<<20)
	line := "  - {name: same, schedule: \"@hourly\", http: {url: \"http://sink.internal/x\"}, timeout: 5s}\n"
	var b bytes.Buffer
	b.WriteString("jobs:\n")
	b.WriteString(strings.Repeat(line, maxFileSize/len(line)+1))
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := path + ": the file is larger than the limit of 1048576 bytes (1 MiB)"
	if _, err := LoadJobs(path); err == nil || err.Error() != want {
		t.Fatalf("LoadJobs = %v, want %q", err, want)
	}
	if _, err := ParseJobs("huge.yaml", b.Bytes()); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("ParseJobs = %v", err)
	}
}

// lowerLimit sets *limit to v for the test.
func lowerLimit(t *testing.T, limit *int, v int) {
	old := *limit
	*limit = v
	t.Cleanup(func() { *limit = old })
}

// TestJobCountLimit: as many jobs as the limit parse; one more is refused
// with the count and the limit. The parse at the limit runs at 10,000 (a
// million jobs are BenchmarkParseJobs's); the refusal at MaxJobs itself.
func TestJobCountLimit(t *testing.T) {
	// The count is checked before any job is looked at: the entries of an
	// oversized list need not even be jobs.
	_, err := ParseJobs("over.yaml", []byte("jobs:\n"+strings.Repeat("- x\n", MaxJobs+1)))
	if want := `over.yaml:1: field "jobs": 1000001 jobs, more than the limit of 1000000`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	lowerLimit(t, &maxJobs, 10_000)
	var b bytes.Buffer
	b.WriteString("jobs:\n")
	for i := range maxJobs {
		fmt.Fprintf(&b, "- {name: job-%06d, schedule: \"%d * * * * *\", timezone: Europe/Berlin, func: f}\n", i, i%60)
	}
	jobs, err := ParseJobs("max.yaml", b.Bytes())
	if err != nil {
		t.Fatalf("%d jobs: %v", maxJobs, err)
	}
	if len(jobs) != maxJobs || jobs[maxJobs-1].Name != "job-009999" || jobs[0].Timeout.D() != DefaultTimeout {
		t.Fatalf("got %d jobs, last %q", len(jobs), jobs[len(jobs)-1].Name)
	}
	fmt.Fprintf(&b, "- {name: job-%06d, schedule: \"@hourly\", func: f}\n", maxJobs)
	_, err = ParseJobs("over.yaml", b.Bytes())
	if want := `over.yaml:1: field "jobs": 10001 jobs, more than the limit of 10000`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestErrorCap: a file with the same mistake everywhere lists MaxErrors
// problems and says how many more there are.
func TestErrorCap(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("jobs:\n")
	for i := range MaxErrors + 5 {
		fmt.Fprintf(&b, "  - {name: j%d, schedule: \"@hourly\"}\n", i)
	}
	_, err := ParseJobs("cap.yaml", b.Bytes())
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != MaxErrors+1 {
		t.Fatalf("got %d errors: %v", len(errs), err)
	}
	if last := errs[len(errs)-1].Error(); last != "cap.yaml: 5 more problems not shown (at most 1000 are listed)" {
		t.Fatalf("last line %q", last)
	}
}

// TestGoodFiles: each testdata/good file parses, and MarshalJobs writes it
// back as a file that parses to the same jobs and marshals to the same bytes.
func TestGoodFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			jobs, err := LoadJobs(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if err := j.Validate(); err != nil {
					t.Errorf("parsed job fails Validate: %v", err)
				}
			}
			out, err := MarshalJobs(jobs)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseJobs("exported.yaml", out)
			if err != nil {
				t.Fatalf("exported file does not parse: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(jobs, again) {
				t.Fatalf("round trip changed the jobs:\n%+v\n%+v\n%s", jobs, again, out)
			}
			out2, err := MarshalJobs(again)
			if err != nil || !bytes.Equal(out, out2) {
				t.Fatalf("second export differs: %v\n%s\n%s", err, out, out2)
			}
		})
	}
}

func readDir(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}
