package config

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseJobs: ParseJobs never panics; it returns jobs or an error, never
// both; every error line names the file; a file read a job at a time
// (parseSplit) gives what the whole file's tree gives; and a file it
// accepts exports (MarshalJobs) to one that parses to the same jobs. The
// seed corpus is testdata/fuzz/FuzzParseJobs plus every file of
// testdata/good and testdata/bad and splitCases; explore with
// `go test -run '^$' -fuzz FuzzParseJobs -fuzztime 60s -fuzzminimizetime 3s ./config`.
func FuzzParseJobs(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		for _, data := range readDir(f, dir) {
			f.Add(data)
		}
	}
	for _, c := range splitCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compareSplit(t, data)
		jobs, err := ParseJobs("f.yaml", data)
		if err != nil {
			if jobs != nil {
				t.Fatalf("jobs and an error: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("error line without the file name: %q", line)
				}
			}
			return
		}
		out, err := MarshalJobs(jobs)
		if err != nil {
			t.Fatalf("MarshalJobs: %v", err)
		}
		again, err := ParseJobs("f.yaml", out)
		if err != nil {
			t.Fatalf("exported file does not parse: %v\n%s", err, out)
		}
		if len(jobs) == 0 && len(again) == 0 {
			return
		}
		if !reflect.DeepEqual(jobs, again) {
			t.Fatalf("round trip changed the jobs:\n%#v\n%#v", jobs, again)
		}
	})
}
