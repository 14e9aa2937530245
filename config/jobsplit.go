package config

import (
	"bytes"
	"errors"
	"runtime"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A jobs file read a job at a time. yaml.v3 builds a node tree of the
// whole document before anything can be decoded, and that tree is ten to
// twenty times the file: gigabytes for a million jobs. Most files are laid
// out the same way, though (a top-level "jobs:" line, then its entries, each
// starting with a dash at one indentation), and then each entry can be
// parsed on its own, the file's lines telling where entries start. YAML
// makes every line at an entry's indentation that starts with a dash begin
// the next entry, except inside a quoted string or a flow collection, which
// then cannot parse as a part of its own. So a file is read in parts (a
// batch of entries each) only when every part parses as a list of as many
// entries as it has such lines; any problem at all (a YAML
// error, an alias, an unusual layout) sends the file to parseWhole, which
// reports exactly what it always did, but for a YAML error in a later
// batch, which is found from that batch on (splitFailed.yamlErrorFrom),
// with the same message.

// jobsLayout is a file split at its entries.
type jobsLayout struct {
	// skeleton is the file without the entries, "jobs:" then saying
	// "jobs: []": the top mapping and defaults, parsed as a whole.
	skeleton  []byte
	jobsLine  int // 1-based line of "jobs:"
	bodyLines int // lines taken out after jobsLine: later lines shift by this
	items     []span
}

// span is one entry: data[start:end], starting on line.
type span struct{ start, end, line int }

// errNotSplit: the file is not one parseSplit reads.
var errNotSplit = errors.New("config: not split")

// parseSplit parses data a job at a time when its layout allows (see
// above), with the same results as parseWhole; errNotSplit leaves the file
// to parseWhole.
func parseSplit(filename string, data []byte, o JobsOptions, each func(*Job)) (*jobReader, error) {
	if len(data) > maxFileSize || !utf8.Valid(data) {
		return nil, errNotSplit
	}
	l, ok := splitJobs(data)
	if !ok {
		return nil, errNotSplit
	}
	c := &collector{file: filename}
	root := parseDoc(c, l.skeleton, maxFileSize)
	if len(c.errs) > 0 || !l.fits(root) {
		return nil, errNotSplit
	}
	walk(root, func(n *yaml.Node) {
		if n.Line > l.jobsLine {
			n.Line += l.bodyLines
		}
	})
	_, defs := parseTop(c, root)
	if len(c.errs) > 0 {
		return nil, errNotSplit
	}
	if len(l.items) > maxJobs {
		c.addf(l.jobsLine, "jobs", "%d jobs, more than the limit of %d", len(l.items), maxJobs)
		return nil, c.err()
	}
	r := newJobReader(c, o, defs, len(l.items), each)
	if at := r.readEntries(data, l.items); at >= 0 {
		return nil, &splitFailed{items: l.items, at: at}
	}
	return r.result()
}

// yamlReadable reports whether data (valid UTF-8) holds only characters a
// YAML stream may: yaml.v3 refuses any other anywhere, comments included.
func yamlReadable(data []byte) bool {
	for _, r := range string(data) { // ranging over the conversion copies nothing
		switch {
		case r >= 0x20 && r <= 0x7e, r == '\n', r == '\t', r == '\r', r == 0x85,
			r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000:
		default:
			return false
		}
	}
	return true
}

// entryBatch is how many entries a worker parses and checks at a time.
const entryBatch = 256

// readEntries parses and checks the entries on as many goroutines as there
// are CPUs, a batch each, and takes them in file order. It returns the
// first entry of the first batch that is not one parseSplit reads, -1 when
// every batch was.
func (r *jobReader) readEntries(data []byte, items []span) int {
	batches := make(chan chan []checked, 2*runtime.GOMAXPROCS(0)) // bounds the batches in flight
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(batches)
		for lo := 0; lo < len(items); lo += entryBatch {
			b := items[lo:min(lo+entryBatch, len(items))]
			out := make(chan []checked, 1)
			select {
			case batches <- out:
			case <-done:
				return
			}
			go func() { out <- r.checkBatch(data, b) }()
		}
	}()
	at := 0
	for out := range batches {
		cs := <-out
		if cs == nil {
			return at
		}
		for i := range cs {
			r.take(cs[i])
		}
		at += len(cs)
	}
	return -1
}

// checkBatch parses and checks the entries b; nil if they are not entries
// parseSplit reads.
func (r *jobReader) checkBatch(data []byte, b []span) []checked {
	nodes := parseEntries(data[b[0].start:b[len(b)-1].end], b[0].line, len(b))
	if nodes == nil {
		return nil
	}
	cs := make([]checked, len(b))
	for i, n := range nodes {
		cs[i] = r.check(n)
		nodes[i] = nil // let its tree go
	}
	return cs
}

// fits reports whether the skeleton's root is what splitJobs assumed: a
// block mapping whose "jobs" key, at the start of jobsLine, holds the
// empty list put there.
func (l *jobsLayout) fits(root *yaml.Node) bool {
	if root == nil || root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "jobs" {
			return k.Line == l.jobsLine && k.Column == 1 && v.Line == l.jobsLine &&
				v.Kind == yaml.SequenceNode && len(v.Content) == 0 && v.Tag == "!!seq"
		}
	}
	return false
}

// parseEntries parses the text of k consecutive entries (a list of k
// items), whose first line is line of the file, and returns the items with
// the file's line numbers; nil when the text is anything else or uses
// anchors or aliases. One parse of a batch: a parser per entry would
// allocate more than the entry's own tree.
func parseEntries(text []byte, line, k int) []*yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || len(seq.Content) != k || seq.Anchor != "" || seq.Tag != "!!seq" {
		return nil
	}
	plain := true
	for _, n := range seq.Content {
		walk(n, func(x *yaml.Node) {
			if x.Kind == yaml.AliasNode || x.Anchor != "" {
				plain = false
			}
			x.Line += line - 1
		})
	}
	if !plain {
		return nil
	}
	return seq.Content
}

// splitJobs finds the "jobs:" line and its entries by their lines; ok
// false when the file is not laid out as the package comment above says.
func splitJobs(data []byte) (l jobsLayout, ok bool) {
	for _, brk := range []string{"\u0085", "\u2028", "\u2029"} {
		if bytes.Contains(data, []byte(brk)) {
			return l, false // more line breaks of YAML's than lines here
		}
	}
	ind := -1 // the entries' indentation, once known
	line := 0
	inBody := false
	for off := 0; off < len(data); {
		end := len(data)
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(data[off:end], []byte("\n")), []byte("\r"))
		if bytes.IndexByte(text, '\r') >= 0 {
			return l, false // a lone CR breaks the line for YAML
		}
		line++
		if !inBody {
			if len(text) > 0 && text[0] == '%' {
				return l, false // a directive, which could change what the entries mean
			}
			if isJobsKey(text) {
				inBody, l.jobsLine = true, line
				colon := off + len("jobs:")
				l.skeleton = append(append(append([]byte{}, data[:colon]...), " []"...), data[colon:end]...)
			}
			off = end
			continue
		}
		rest := bytes.TrimLeft(text, " ")
		sp := len(text) - len(rest)
		switch {
		case len(rest) == 0 || rest[0] == '#':
			// blank or a comment: part of the entry before it. Before the
			// first entry it is parsed by no part, so a character YAML
			// refuses there leaves the file to parseWhole, which names it.
			if len(l.items) == 0 && !yamlReadable(text) {
				return l, false
			}
		case sp == 0 && rest[0] != '-':
			// the next top-level key (or ---, ...): the list ended
			l.closeLast(off)
			l.bodyLines = line - l.jobsLine - 1
			l.skeleton = append(l.skeleton, data[off:]...)
			return l, len(l.items) > 0
		case ind < 0 && !isDash(rest), sp < ind, sp == ind && !isDash(rest):
			return l, false
		case sp == ind || ind < 0:
			ind = sp
			l.closeLast(off)
			l.items = append(l.items, span{start: off, end: -1, line: line})
		}
		off = end
	}
	l.closeLast(len(data))
	return l, inBody && len(l.items) > 0
}

// closeLast ends the last entry at off.
func (l *jobsLayout) closeLast(off int) {
	if n := len(l.items); n > 0 && l.items[n-1].end < 0 {
		l.items[n-1].end = off
	}
}

// isJobsKey: the line is "jobs:" at the start, then nothing but blanks and
// a comment.
func isJobsKey(text []byte) bool {
	rest, ok := bytes.CutPrefix(text, []byte("jobs:"))
	if !ok {
		return false
	}
	t := bytes.TrimLeft(rest, " ")
	return len(t) == 0 || (t[0] == '#' && len(t) < len(rest))
}

// isDash: the text (after its indentation) starts a list entry.
func isDash(rest []byte) bool {
	return rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ')
}
