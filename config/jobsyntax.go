package config

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// splitFailed is errNotSplit for a file whose batch of entries from item
// at did not parse as entries of their own: most often a YAML error
// there, which yamlErrorFrom finds without a tree of the file.
type splitFailed struct {
	items []span
	at    int
}

func (e *splitFailed) Error() string        { return errNotSplit.Error() }
func (e *splitFailed) Is(target error) bool { return target == errNotSplit }

// yamlErrorFrom returns what parseWhole reports for the file, when that is
// a YAML error, without a tree of the entries that parsed before the
// failing batch: a typo near the end of a million-job file would otherwise
// cost gigabytes to report. Those entries are blanked, only their line
// breaks kept, so every later line and column stays where it was (and the
// parser scans bytes slowly: spaces would cost as much as the entries);
// the first entry is kept, as yaml.v3 names the line where the jobs list
// starts for some errors. They parsed on their own, and nothing of an
// entry carries on in YAML but an anchor, which none of them has (a batch
// with one never parses as entries of its own: parseEntries), so the
// parser meets the same first error at the same place. It returns nil,
// leaving the file to parseWhole, when the blanked file has no YAML error
// (the batch failed for another reason) or the file indents with tabs
// (parseDoc reports those instead).
func (e *splitFailed) yamlErrorFrom(filename string, data []byte) error {
	if e.at < 2 || len(tabIndents(data)) > 0 {
		return nil // nothing worth blanking, or not a YAML error
	}
	lo, hi := e.items[1].start, e.items[e.at].start
	n := bytes.Count(data[lo:hi], []byte("\n"))
	blank := make([]byte, 0, len(data)-(hi-lo)+n)
	blank = append(append(append(blank, data[:lo]...), bytes.Repeat([]byte("\n"), n)...), data[hi:]...)
	var doc yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(blank)).Decode(&doc)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	c := &collector{file: filename}
	c.add(yamlError(data, err))
	return c.err()
}
