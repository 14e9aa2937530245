package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder turns yaml.Node trees into Go values by hand rather than through
// yaml.v3's reflection, so that each problem carries its own line and field
// and decoding goes on past it (yaml.v3 stops at the first type error, and
// Node.Decode cannot be made strict about unknown fields).
type decoder struct {
	errs   []*Error
	lines  map[string]int  // field path -> line of its key, for later validation
	failed map[string]bool // field paths that did not decode
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
	if d.failed == nil {
		d.failed = map[string]bool{}
	}
	d.failed[field] = true
}

// failedUnder reports whether field or a field enclosing it did not decode:
// validating what is left of it would only repeat the problem.
func (d *decoder) failedUnder(field string) bool {
	for f := field; ; {
		if d.failed[f] {
			return true
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			return f != "" && d.failed[""]
		}
		f = f[:i]
	}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// mapping calls f for each key of the mapping n in order, after rejecting
// non-string and duplicate keys. fold compares keys case-insensitively (HTTP
// header names).
func (d *decoder) mapping(n *yaml.Node, field string, fold bool, f func(key string, k, v *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, field, "must be a mapping, found %s", kindName(n))
		return false
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" || k.Value == "" {
			d.errorf(k, field, "keys must be non-empty strings, found %s", kindName(k))
			continue
		}
		id := k.Value
		if fold {
			id = strings.ToLower(id)
		}
		if first, dup := seen[id]; dup {
			d.errorf(k, join(field, k.Value), "duplicate key (first at line %d)", first)
			continue
		}
		seen[id] = k.Line
		if d.lines != nil {
			d.lines[join(field, k.Value)] = k.Line
		}
		f(k.Value, k, v)
	}
	return true
}

// unknown reports a key that is not one of known, suggesting the nearest.
func (d *decoder) unknown(k *yaml.Node, field string, known []string) {
	best, bestDist := "", 3
	for _, name := range known {
		if dist := editDistance(strings.ToLower(k.Value), name); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best != "" {
		d.errorf(k, field, "unknown field (did you mean %q?)", best)
		return
	}
	d.errorf(k, field, "unknown field; known fields are %s", strings.Join(known, ", "))
}

// scalarTags are the tags a string field accepts, as the text written:
// yaml.v3 resolves an unquoted 123, 1.5, true or 2026-01-02 to a number, a
// boolean or a timestamp, which is still a valid job name or header value.
// Null (an empty value), !!binary and custom tags are refused.
var scalarTags = []string{"!!str", "!!int", "!!float", "!!bool", "!!timestamp"}

func (d *decoder) str(v *yaml.Node, field string) (string, bool) {
	if v.Kind != yaml.ScalarNode || !slices.Contains(scalarTags, v.Tag) {
		d.errorf(v, field, "must be a string, found %s", kindName(v))
		return "", false
	}
	return v.Value, true
}

// nonEmpty is str for fields whose omission means a default: writing them
// empty is a mistake, not a request for the default.
func (d *decoder) nonEmpty(v *yaml.Node, field, hint string) (string, bool) {
	s, ok := d.str(v, field)
	if ok && strings.TrimSpace(s) == "" {
		d.errorf(v, field, "must not be empty (%s)", hint)
		return "", false
	}
	return s, ok
}

func (d *decoder) boolean(v *yaml.Node, field string) (bool, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
		d.errorf(v, field, "must be true or false, found %s", kindName(v))
		return false, false
	}
	b, err := strconv.ParseBool(v.Value)
	if err != nil {
		d.errorf(v, field, "must be true or false, found %s", kindName(v))
		return false, false
	}
	return b, true
}

func (d *decoder) integer(v *yaml.Node, field string) (int, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		d.errorf(v, field, "must be a whole number, found %s", kindName(v))
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 0, 64)
	if err != nil || n != int64(int(n)) {
		d.errorf(v, field, "must be a whole number, found %s", kindName(v))
		return 0, false
	}
	return int(n), true
}

func (d *decoder) duration(v *yaml.Node, field string) (Duration, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		d.errorf(v, field, "must be a duration such as 30s, 5m or 1h30m, found %s", kindName(v))
		return 0, false
	}
	if v.Tag == "!!int" && v.Value != "0" {
		d.errorf(v, field, "%s has no unit: write a duration such as %ss", v.Value, v.Value)
		return 0, false
	}
	x, err := ParseDuration(v.Value)
	if err != nil {
		d.errorf(v, field, "%v", err)
		return 0, false
	}
	return x, true
}

// timestamp reads an RFC 3339 time, such as 2026-12-24T18:00:00Z, quoted
// or not (yaml.v3 tags it !!timestamp unquoted).
func (d *decoder) timestamp(v *yaml.Node, field string) (time.Time, bool) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "!!timestamp") {
		d.errorf(v, field, "must be an RFC 3339 time such as 2026-12-24T18:00:00Z, found %s", kindName(v))
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v.Value))
	if err != nil {
		d.errorf(v, field, "%q is not an RFC 3339 time such as 2026-12-24T18:00:00Z (a date, a time and a zone offset or Z)", v.Value)
		return time.Time{}, false
	}
	return t, true
}

func (d *decoder) list(v *yaml.Node, field string) ([]*yaml.Node, bool) {
	if v.Kind != yaml.SequenceNode {
		d.errorf(v, field, "must be a list, found %s", kindName(v))
		return nil, false
	}
	return v.Content, true
}

// item returns the path of a list's i-th item and records its line.
func (d *decoder) item(field string, i int, it *yaml.Node) string {
	path := fmt.Sprintf("%s[%d]", field, i)
	if d.lines != nil {
		d.lines[path] = it.Line
	}
	return path
}

func (d *decoder) strList(v *yaml.Node, field string) ([]string, bool) {
	items, ok := d.list(v, field)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	good := true
	for i, it := range items {
		s, ok := d.str(it, d.item(field, i, it))
		good = good && ok
		out = append(out, s) // keep positions: later messages name [i]
	}
	return out, good
}

func (d *decoder) intList(v *yaml.Node, field string) ([]int, bool) {
	items, ok := d.list(v, field)
	if !ok {
		return nil, false
	}
	out := make([]int, 0, len(items))
	good := true
	for i, it := range items {
		n, ok := d.integer(it, d.item(field, i, it))
		good = good && ok
		out = append(out, n) // keep positions: later messages name [i]
	}
	return out, good
}

func (d *decoder) strMap(v *yaml.Node, field string, fold bool) (map[string]string, bool) {
	out := map[string]string{}
	good := d.mapping(v, field, fold, func(key string, _, val *yaml.Node) {
		if s, ok := d.str(val, join(field, key)); ok {
			out[key] = s
		}
	})
	return out, good
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
