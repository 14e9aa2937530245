package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yaml.v3 (v3.0.6) reports a syntax error as "yaml: line N: problem", but N
// is not always the line of the problem (its parser.fail):
//
//   - it is the line of the error's context (the start of the enclosing
//     construct, such as the '[' of a flow list) unless that is on the first
//     line, and otherwise the line of the problem itself;
//   - for a scanner error N is 1-based, but for a parser error it is the
//     0-based line, one less than the line in the file;
//   - when both lines are the first, there is no "line N:" at all;
//   - reader errors (a control character) and unknown aliases carry no line.
//
// yamlError undoes each of these, so that every class of syntax error names
// the line where the problem is. The catalogue in testdata/bad holds one
// file per class.

var yamlErrLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parserProblems are the problems yaml.v3's parser reports (parserc.go);
// every other problem with a line is the scanner's.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// blockProblems are the parser problems whose context is the start of the
// enclosing block mapping or list, often many lines before the entry at
// fault. (A flow problem's context is its opening bracket: the line to
// name, since the bracket is what is not closed.)
var blockProblems = map[string]bool{
	"did not find expected key":           true,
	"did not find expected '-' indicator": true,
}

// scanBudget bounds the bytes re-parsed to find the line of a parser error
// whose context is on an earlier line (see problemLine).
const scanBudget = 4 << 20

// yamlError turns err, from parsing data, into an Error on the line where
// the problem is.
func yamlError(data []byte, err error) *Error {
	m := yamlErrLine.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{Msg: "invalid YAML: " + err.Error()}
	}
	reported, _ := strconv.Atoi(m[1]) // 0: no line given
	problem := m[2]
	e := &Error{Line: reported, Msg: "invalid YAML: " + problem}
	switch {
	case problem == "control characters are not allowed":
		if line, col, r := firstControl(data); line > 0 {
			e.Line = line
			e.Msg = fmt.Sprintf("invalid YAML: control character %U (column %d) is not allowed", r, col)
		}
	case strings.HasPrefix(problem, "unknown anchor '"):
		name := strings.TrimSuffix(strings.TrimPrefix(problem, "unknown anchor '"), "' referenced")
		e.Line = aliasLine(data, name)
		e.Msg = fmt.Sprintf("alias *%s: anchors and aliases are not supported", name)
	case parserProblems[problem]:
		e.Line = min(reported+1, max(lineCount(data), 1))
		if blockProblems[problem] {
			e.Line = problemLine(data, e.Line, problem)
		}
	case strings.HasPrefix(problem, "input error: "):
		e.Line = 0
	case reported == 0:
		e.Line = 1 // a scanner error whose context and problem are both on line 1
	}
	return e
}

// problemLine returns the line of a block problem that yaml.v3 reported on
// line from (the start of the enclosing mapping or list, or the problem
// itself). The problem is on the first line, from from on, at which
// the file cut after that line fails to parse with the same problem: lines
// before it parse as they do in the whole file. When that costs more than
// scanBudget bytes of parsing, from it is.
func problemLine(data []byte, from int, problem string) int {
	spent := 0
	line := 0
	for end := range lineEnds(data) {
		line++
		if line < from {
			continue
		}
		if spent += end; spent > scanBudget {
			return from
		}
		err := decodeAll(data[:end])
		if err == nil {
			continue
		}
		if m := yamlErrLine.FindStringSubmatch(err.Error()); m != nil && m[2] == problem {
			return line
		}
	}
	return from
}

// decodeAll parses every document of data and returns the first error.
func decodeAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lineEnds yields the offset just past each line of data (its newline
// included).
func lineEnds(data []byte) func(func(int) bool) {
	return func(yield func(int) bool) {
		off := 0
		for _, text := range lines(data) {
			off += len(text)
			if off < len(data) {
				off++ // the newline
			}
			if !yield(off) {
				return
			}
		}
	}
}

func lineCount(data []byte) int {
	n := 0
	for range lines(data) {
		n++
	}
	return n
}

// firstControl finds the first character YAML does not allow in a UTF-8
// file (YAML 1.2, 5.1): its line, 1-based column and value.
func firstControl(data []byte) (line, col int, r rune) {
	for n, text := range lines(data) {
		c := 0
		for _, ch := range string(text) {
			c++
			if !yamlPrintable(ch) {
				return n, c, ch
			}
		}
	}
	return 0, 0, 0
}

func yamlPrintable(r rune) bool {
	switch {
	case r == '\t', r == '\n', r == '\r', r == 0x85:
	case r >= 0x20 && r <= 0x7E, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
	default:
		return false
	}
	return true
}

// aliasLine finds the line of the first alias *name, or 0.
func aliasLine(data []byte, name string) int {
	re := regexp.MustCompile(`(^|[\s\[\]{},:])\*` + regexp.QuoteMeta(name) + `($|[\s\[\]{},])`)
	for n, text := range lines(data) {
		if re.Match(text) {
			return n
		}
	}
	return 0
}
