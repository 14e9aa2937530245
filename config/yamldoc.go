package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a jobs file: MaxJobs jobs of a few hundred bytes each
// (bench/jobsgen's take about 185) fit with room to spare.
const MaxFileSize = 512 << 20

// MaxSettingsFileSize bounds a settings file (DecodeFile), which is parsed
// whole: a few keys, never near this.
const MaxSettingsFileSize = 64 << 20

// fileError reports a file that could not be read, without repeating its
// name ("jobs.yaml: no such file or directory").
func fileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: path, Msg: msg, Err: err}
}

// readFile reads at most limit+1 bytes of path, so that a huge or endless
// file (a FIFO, /dev/zero) is refused without filling memory.
func readFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

// parseDoc checks data (at most limit bytes) before and while parsing it into a yaml.Node tree and
// returns the root node (nil for an empty document). Each check reports
// every place it applies to; a failed check stops the parse, since the tree
// would be missing or misleading.
//
// Aliases and anchors are refused outright: a jobs file has no need of them,
// and expanding them is how a small file becomes an exponentially large one
// (a "billion laughs"). The tree yaml.v3 builds keeps aliases as references,
// so the refusal happens before anything is expanded.
func parseDoc(c *collector, data []byte, limit int) *yaml.Node {
	if len(data) > limit {
		c.addf(0, "", "the file is larger than the limit of %d bytes (%d MiB)", limit, limit>>20)
		return nil
	}
	if !utf8.Valid(data) {
		for line, text := range lines(data) {
			if !utf8.Valid(text) {
				col := 1 + utf8.RuneCount(text[:firstInvalid(text)])
				c.addf(line, "", "not valid UTF-8 (column %d); the file must be UTF-8 text", col)
			}
		}
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		if tabs := tabIndents(data); len(tabs) > 0 {
			for _, line := range tabs {
				c.addf(line, "", "tab character in indentation: YAML indents with spaces")
			}
			return nil
		}
		c.add(yamlError(data, err))
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			c.add(yamlError(data, err))
		} else {
			c.addf(extra.Line, "", "a second YAML document (after ---): a file holds one")
		}
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	type key struct {
		line int
		msg  string
	}
	seen := map[key]bool{}
	walk(root, func(n *yaml.Node) {
		var k key
		switch {
		case n.Kind == yaml.AliasNode:
			k = key{n.Line, "alias *" + n.Value}
		case n.Anchor != "":
			k = key{n.Line, "anchor &" + n.Anchor}
		default:
			return
		}
		if !seen[k] { // one line per alias name and line, however often repeated
			seen[k] = true
			c.addf(k.line, "", "%s: anchors and aliases are not supported", k.msg)
		}
	})
	if len(seen) > 0 {
		return nil
	}
	return root
}

// walk visits n and its descendants, never following an alias.
func walk(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	if n.Kind == yaml.AliasNode {
		return
	}
	for _, ch := range n.Content {
		walk(ch, f)
	}
}

// lines yields each line of data (without its newline) with its number.
func lines(data []byte) func(func(int, []byte) bool) {
	return func(yield func(int, []byte) bool) {
		for n := 1; len(data) > 0; n++ {
			text := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				text, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if !yield(n, text) {
				return
			}
		}
	}
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// tabIndents returns the lines whose indentation holds a tab.
func tabIndents(data []byte) []int {
	var out []int
	for line, text := range lines(data) {
		indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 && len(bytes.TrimSpace(text)) > 0 {
			out = append(out, line)
		}
	}
	return out
}

// Node kinds as the messages name them.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}
