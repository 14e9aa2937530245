package config

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// DecodeFile reads a strict YAML file of settings: one mapping whose keys
// are in known. It makes the jobs file's checks (size, though at most
// MaxSettingsFileSize; UTF-8, tabs, duplicate keys, anchors and aliases)
// and calls set with each key, the line it is on and its value; a key
// outside known is reported with the nearest known key as a suggestion. An
// empty file sets nothing.
//
// A file that cannot be read is one *Error naming only the file; every other
// problem comes back in Errors naming file, line and field (the key).
func DecodeFile(path string, known []string, set func(key string, line int, v Value)) error {
	data, err := readFile(path, MaxSettingsFileSize)
	if err != nil {
		return fileError(path, err)
	}
	c := &collector{file: path}
	root := parseDoc(c, data, MaxSettingsFileSize)
	if len(c.errs) > 0 || root == nil {
		return c.err()
	}
	d := &decoder{}
	d.mapping(root, "", false, func(key string, k, v *yaml.Node) {
		if !slices.Contains(known, key) {
			d.unknown(k, key, known)
			return
		}
		set(key, k.Line, Value{d: d, n: v, key: key})
	})
	for _, e := range d.errs {
		c.add(e)
	}
	return c.err()
}

// Value is one value of a file DecodeFile reads. Each method decodes it as
// one type and says whether it could; a value of another type is reported
// against its key and line, and DecodeFile returns it.
type Value struct {
	d   *decoder
	n   *yaml.Node
	key string
}

// Scalar says whether the value is a single value rather than a list or a
// mapping.
func (v Value) Scalar() bool { return v.n.Kind == yaml.ScalarNode }

// Str decodes a string.
func (v Value) Str() (string, bool) { return v.d.str(v.n, v.key) }

// Bool decodes true or false.
func (v Value) Bool() (bool, bool) { return v.d.boolean(v.n, v.key) }

// Int decodes a whole number.
func (v Value) Int() (int, bool) { return v.d.integer(v.n, v.key) }

// Duration decodes a duration such as 10s.
func (v Value) Duration() (Duration, bool) { return v.d.duration(v.n, v.key) }

// Strings decodes a list of strings.
func (v Value) Strings() ([]string, bool) { return v.d.strList(v.n, v.key) }
