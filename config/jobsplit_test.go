package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// splitCases are layouts at the edges of what parseSplit reads: each must
// parse as the whole file does, split or not.
var splitCases = map[string]string{
	"indent 0":         "jobs:\n- name: a\n  schedule: \"@hourly\"\n  func: f\n- name: b\n  schedule: \"@daily\"\n  func: f\n",
	"comments between": "# top\njobs: # the list\n  # first\n  - name: a\n    schedule: \"@hourly\"\n# at column 0\n    func: f\n\n  - name: b\n    schedule: \"@daily\"\n    func: f\n  # trailing\n",
	"defaults after":   "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n  - name: b\n    schedule: nope\n    func: f\ndefaults:\n  notify:\n    on: [failure]\n    webhook: {url: \"https://hooks.example/x\"}\n",
	"bad defaults":     "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\ndefaults:\n  notify:\n    on: [failure]\n    webhook: {url: \"ftp://x\"}\n",
	"defaults before":  "defaults:\n  notify:\n    on: [failure]\n    webhook: {url: \"https://hooks.example/x\"}\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n",
	"error after list": "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\nbogus: 1\n",
	"second jobs key":  "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\njobs:\n  - name: b\n    schedule: \"@hourly\"\n    func: f\n",
	"quoted over dash": "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    http: {url: \"https://x.example/\", body: \"one\n  - name: b\"}\n  - name: c\n    schedule: \"@hourly\"\n    func: f\n",
	"flow over dash":   "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    env: {A: b,\n  - x}\n    func: f\n",
	"flow root":        "{defaults: {},\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n}\n",
	"alias across":     "jobs:\n  - name: a\n    schedule: &s \"@hourly\"\n    func: f\n  - name: b\n    schedule: *s\n    func: f\n",
	"second document":  "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n---\njobs: []\n",
	"document end":     "---\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n...\n",
	"crlf":             "jobs:\r\n  - name: a\r\n    schedule: \"@hourly\"\r\n    func: f\r\n  - name: b\r\n    schedule: \"@daily\"\r\n    func: f\r\n",
	"block scalar":     "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    http:\n      url: \"https://x.example/\"\n      body: |\n        - not an entry\n          - nor this\n  - name: b\n    schedule: \"@hourly\"\n    func: f\n",
	"tab in entry":     "jobs:\n  - name: a\n\tschedule: \"@hourly\"\n    func: f\n",
	"ragged entries":   "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n - name: b\n   schedule: \"@hourly\"\n   func: f\n",
	"scalar entry":     "jobs:\n  - just text\n  - name: b\n    schedule: \"@hourly\"\n    func: f\n",
	"nested list":      "jobs:\n  - - name: a\n  - name: b\n    schedule: \"@hourly\"\n    func: f\n",
	"empty entry":      "jobs:\n  -\n  - name: b\n    schedule: \"@hourly\"\n    func: f\n",
	"jobs in a scalar": "note: |\n  jobs:\n    - name: x\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n",
	"directive":        "%YAML 1.1\n---\njobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n",
	"tagged list":      "jobs: !!seq\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n",
	"duplicate names":  "jobs:\n  - name: a\n    schedule: \"@hourly\"\n    func: f\n  - name: a\n    schedule: \"@daily\"\n    func: f\n",
	"unknown field":    "jobs:\n  - name: a\n    schedul: \"@hourly\"\n    func: f\n",
	"no jobs":          "jobs:\n",
	"empty list":       "jobs: []\n",
	"lone cr":          "jobs:\n - 0\r0",
	"next line":        "jobs:\n  - name: a\n    schedule: \"@hourly\"\u0085  - name: b\n    func: f\n",
}

// TestSplitParsesAsWhole: a file read a job at a time gives the jobs, or
// the errors (file, line, field), that the whole file's tree gives; and
// the usual layouts are read a job at a time.
func TestSplitParsesAsWhole(t *testing.T) {
	inputs := map[string][]byte{}
	for name, s := range splitCases {
		inputs[name] = []byte(s)
	}
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		for i, data := range readDir(t, dir) {
			inputs[fmt.Sprintf("%s#%d", dir, i)] = data
		}
	}
	split := map[string]bool{}
	for name, data := range inputs {
		msg, ok := compareSplit(t, data)
		split[name] = ok
		if name == "defaults after" && !strings.HasPrefix(msg, "f.yaml:6: job \"b\": field \"schedule\"") {
			t.Errorf("defaults after: lines not kept: %s", msg)
		}
	}
	for _, name := range []string{"indent 0", "comments between", "defaults after", "defaults before", "crlf", "block scalar", "duplicate names", "unknown field", "document end"} {
		if !split[name] {
			t.Errorf("%s: not read a job at a time", name)
		}
	}
	for _, name := range []string{"quoted over dash", "flow over dash", "flow root", "alias across", "tab in entry", "ragged entries", "directive", "lone cr", "next line", "tagged list", "second jobs key", "second document"} {
		if split[name] {
			t.Errorf("%s: read a job at a time, want the whole file's parse", name)
		}
	}
	n := 0
	for _, ok := range split {
		if ok {
			n++
		}
	}
	if n < len(inputs)/2 {
		t.Errorf("only %d of %d files read a job at a time", n, len(inputs))
	}
}

// compareSplit parses data both ways and fails t where parseSplit, when it
// reads the file, disagrees with parseWhole. It returns the error message
// ("<nil>" for none) and whether parseSplit read the file.
func compareSplit(t testing.TB, data []byte) (msg string, ok bool) {
	t.Helper()
	o := JobsOptions{HasFunc: func(n string) bool { return n == "f" }}
	jobsOf := func(r *jobReader) []Job {
		if r == nil {
			return nil
		}
		return r.jobs
	}
	w, werr := parseWhole("f.yaml", data, o, nil)
	s, serr := parseSplit("f.yaml", data, o, nil)
	if errors.Is(serr, errNotSplit) {
		// A YAML error found from the failing batch on is parseWhole's.
		var sf *splitFailed
		if errors.As(serr, &sf) {
			if ferr := sf.yamlErrorFrom("f.yaml", data); ferr != nil && fmt.Sprint(ferr) != fmt.Sprint(werr) {
				t.Errorf("%q:\nfrom the failing batch: %v\nwhole: %v", data, ferr, werr)
			}
		}
		return fmt.Sprint(werr), false
	}
	wj, sj := jobsOf(w), jobsOf(s)
	if fmt.Sprint(serr) != fmt.Sprint(werr) {
		t.Errorf("%q:\nsplit: %v\nwhole: %v", data, serr, werr)
	}
	if !reflect.DeepEqual(sj, wj) {
		t.Errorf("%q:\nsplit: %#v\nwhole: %#v", data, sj, wj)
	}
	return fmt.Sprint(werr), true
}

// TestCheckJobsKeepsNone: CheckJobsWith hands over the jobs ParseJobs
// returns, in order, and fails where it fails, with the same errors.
func TestCheckJobsKeepsNone(t *testing.T) {
	for name, s := range splitCases {
		o := JobsOptions{HasFunc: func(n string) bool { return n == "f" }}
		want, werr := ParseJobsWith("f.yaml", []byte(s), o)
		var got []Job
		n, err := CheckJobsWith("f.yaml", []byte(s), o, func(j *Job) { got = append(got, *j) })
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%s: CheckJobsWith: %v, ParseJobsWith: %v", name, err, werr)
		}
		if werr == nil && (n != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: CheckJobsWith gave %d jobs %#v, ParseJobsWith %#v", name, n, got, want)
		}
		if werr != nil && n != 0 {
			t.Errorf("%s: %d jobs with an error", name, n)
		}
	}
}

// TestSplitBatchesInOrder: entries checked on several goroutines, a batch
// each, come out in file order, with errors across batches (a duplicate
// name) found as in one pass; an entry that is not one
// parseSplit reads, in a late batch, hands the whole file to parseWhole.
func TestSplitBatchesInOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString("jobs:\n")
	n := 3*entryBatch + 5
	for i := range n {
		name := fmt.Sprintf("j%d", i)
		if i == 2*entryBatch+1 {
			name = "j3" // a duplicate of an entry in the first batch
		}
		sch := `"@hourly"`
		if i%97 == 0 {
			sch = "nope"
		}
		items := ""
		if i%50 == 0 {
			items = fmt.Sprintf("    items: %d\n", MaxItems)
		}
		fmt.Fprintf(&b, "  - name: %s\n    schedule: %s\n%s    func: f\n", name, sch, items)
	}
	msg, ok := compareSplit(t, []byte(b.String()))
	if !ok || !strings.Contains(msg, `job "j3": field "name": duplicate job name (first at line 12)`) || strings.Count(msg, `field "schedule"`) != (n+96)/97 {
		t.Fatalf("split %v: %s", ok, msg)
	}
	good := strings.ReplaceAll(strings.ReplaceAll(b.String(), "name: j3\n    schedule: \"@hourly\"\n    func: f\n  - name: j4", "name: j3x\n    schedule: \"@hourly\"\n    func: f\n  - name: j4"), "nope", `"@daily"`)
	good = strings.ReplaceAll(good, fmt.Sprintf("items: %d", MaxItems), "items: 2")
	jobs, err := ParseJobsWith("f.yaml", []byte(good), JobsOptions{})
	if err != nil || len(jobs) != n {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	for i := range jobs {
		if want := fmt.Sprintf("j%d", i); jobs[i].Name != want && !(i == 3 && jobs[i].Name == "j3x") && !(i == 2*entryBatch+1 && jobs[i].Name == "j3") {
			t.Fatalf("job %d is %q", i, jobs[i].Name)
		}
	}
	late := good + "  - name: bad\n    schedule: \"unclosed\n"
	if _, ok := compareSplit(t, []byte(late)); ok {
		t.Fatal("a file with a broken entry was read a job at a time")
	}
}
