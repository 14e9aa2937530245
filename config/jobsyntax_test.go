package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A YAML error in a late batch of a long file is reported as parseWhole
// reports it, found from the failing batch on (splitFailed.yamlErrorFrom)
// rather than from a tree of the whole file; what that cannot vouch for
// (an anchor among the blanked entries, tab indentation, a batch that is
// valid YAML) goes to parseWhole.
func TestYAMLErrorFoundFromTheFailingBatch(t *testing.T) {
	entries := func(n int, at int, broken string) string {
		var b strings.Builder
		b.WriteString("# jobs\njobs:\n")
		for i := range n {
			if i == at {
				b.WriteString(broken)
				continue
			}
			fmt.Fprintf(&b, "  - name: j%d\n    schedule: \"@hourly\"\n    http: {url: \"http://x/%d\"}\n", i, i)
		}
		return b.String()
	}
	cases := []struct {
		name, broken string
		at           int
		fromBatch    bool // found from the failing batch, not by parseWhole
	}{
		{"unclosed quote", "  - name: bad\n    schedule: \"unclosed\n", 3*entryBatch + 2, true},
		{"unclosed flow", "  - name: bad\n    http: {url: \"http://x\"\n  - name: after\n", 2*entryBatch + 7, true},
		{"bad indentation", "  - name: bad\n      schedule: x\n    exec: y\n", entryBatch + 1, true},
		{"expected key", "  - name: bad\n    schedule: x\n   oops\n", 2 * entryBatch, true},
		{"mapping in a sequence", "  - name: bad\n  schedule: x\n", 3*entryBatch + 100, false},
		{"control character", "  - name: bad\x07\n", 2*entryBatch + 3, true},
		{"unknown alias", "  - name: bad\n    schedule: *nope\n", 2*entryBatch + 3, true},
		{"last entry", "  - name: bad\n    schedule: [\n", 4*entryBatch - 1, true},
		{"first batch", "  - name: bad\n    schedule: \"x\n", 5, false},
		{"tab indentation", "  - name: bad\n\tschedule: x\n", 2*entryBatch + 3, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(entries(4*entryBatch, c.at, c.broken))
			_, werr := parseWhole("f.yaml", data, JobsOptions{}, nil)
			if werr == nil {
				t.Fatal("the broken file parses whole")
			}
			_, serr := parseSplit("f.yaml", data, JobsOptions{}, nil)
			if !errors.Is(serr, errNotSplit) {
				t.Fatalf("split: %v, want errNotSplit", serr)
			}
			var ferr error
			if sf := (*splitFailed)(nil); errors.As(serr, &sf) {
				ferr = sf.yamlErrorFrom("f.yaml", data)
			}
			if (ferr != nil) != c.fromBatch {
				t.Fatalf("found from the batch: %v, want %v (whole: %v)", ferr, c.fromBatch, werr)
			}
			if ferr != nil && ferr.Error() != werr.Error() {
				t.Errorf("from the failing batch:\n%v\nwhole:\n%v", ferr, werr)
			}
			if _, err := ParseJobs("f.yaml", data); err == nil || err.Error() != werr.Error() {
				t.Errorf("ParseJobs: %v, want %v", err, werr)
			}
		})
	}
	// An alias to an anchor of an earlier batch: the anchor's batch is
	// the one that fails (parseEntries takes no anchor), so it is not
	// blanked, and the error is still parseWhole's.
	data := entries(4*entryBatch, 3*entryBatch, "  - name: bad\n    schedule: *s\n    x: [\n")
	data = strings.Replace(data, "  - name: j300\n    schedule: \"@hourly\"", "  - name: j300\n    schedule: &s \"@hourly\"", 1)
	_, werr := parseWhole("f.yaml", []byte(data), JobsOptions{}, nil)
	_, serr := parseSplit("f.yaml", []byte(data), JobsOptions{}, nil)
	var sf *splitFailed
	if !errors.As(serr, &sf) || sf.at != entryBatch {
		t.Fatalf("split: %v, want the anchor's batch failed", serr)
	}
	if ferr := sf.yamlErrorFrom("f.yaml", []byte(data)); werr == nil || ferr == nil || ferr.Error() != werr.Error() {
		t.Fatalf("from the anchor's batch: %v, whole: %v", ferr, werr)
	}
}
