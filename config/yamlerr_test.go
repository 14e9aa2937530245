package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestYAMLErrorLines checks the line of every class of YAML syntax error
// against the file itself, not only against the golden text: each
// testdata/bad/yaml-*.yaml (and malformed-yaml.yaml) marks the line where
// its problem is with the comment "# error here", and the error must name
// exactly that line.
func TestYAMLErrorLines(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/yaml-*.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("%d yaml-* files: %v", len(files), err)
	}
	files = append(files, "testdata/bad/malformed-yaml.yaml")
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var marked []int
			for n, text := range lines(data) {
				if bytes.Contains(text, []byte("# error here")) {
					marked = append(marked, n)
				}
			}
			if len(marked) != 1 {
				t.Fatalf("want one line marked \"# error here\", found %v", marked)
			}
			_, err = ParseJobs(name, data)
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			if errs[0].Line != marked[0] {
				t.Errorf("%v\nnames line %d; the problem is on line %d", errs[0], errs[0].Line, marked[0])
			}
		})
	}
}

// The search for a block problem's line re-parses the file cut after each
// line; past scanBudget bytes it settles for the line yaml.v3 gave.
func TestProblemLineBudget(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("jobs:\n  - name: big\n")
	for sum := 0; sum <= scanBudget; sum += b.Len() { // the prefixes' bytes
		b.WriteString("    # padding padding padding padding padding padding padding padding\n")
	}
	b.WriteString("   bad: 1\n")
	_, err := ParseJobs("big.yaml", b.Bytes())
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != 2 {
		t.Fatalf("got %v, want the line yaml.v3 gave (2)", err)
	}
}
