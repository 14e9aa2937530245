package runner

import (
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/shardcron/shardcron/config"
)

// redactor puts ${SHARDCRON_JOB_*} references back in place of their
// values. A run's detail goes to the log, the job's history, the API and
// `status`, and errors quote what they failed on: net/http names the URL,
// after a redirect the Location the target chose, which may repeat a
// secret in any encoding. A secret must reach the target and nowhere else.
type redactor struct {
	forms map[string]string // a value, in one of its forms -> its reference
}

// expand expands s against lookup (config.Expand) and remembers every
// SHARDCRON_JOB_* value it put in. An item variable's value is no secret,
// and a short one ("3") would be put back all over the detail.
func (rd *redactor) expand(s string, lookup func(string) (string, bool)) (string, error) {
	return config.Expand(s, func(name string) (string, bool) {
		v, ok := lookup(name)
		if ok && strings.HasPrefix(name, config.JobVarPrefix) {
			rd.add(name, v)
		}
		return v, ok
	})
}

// add remembers value as the variable name's, in the forms an error may
// quote it: as it is, URL-escaped (query and path), JSON- and Go-quoted.
func (rd *redactor) add(name, value string) {
	if value == "" {
		return
	}
	if rd.forms == nil {
		rd.forms = map[string]string{}
	}
	js, _ := json.Marshal(value)
	for _, f := range []string{value, url.QueryEscape(value), url.PathEscape(value),
		string(js[1 : len(js)-1]), strings.Trim(strconv.Quote(value), `"`)} {
		rd.forms[f] = "${" + name + "}"
	}
}

// apply returns s with every remembered form replaced by its reference,
// the longest forms first.
func (rd *redactor) apply(s string) string {
	if len(rd.forms) == 0 {
		return s
	}
	olds := make([]string, 0, len(rd.forms))
	for f := range rd.forms {
		olds = append(olds, f)
	}
	slices.SortFunc(olds, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(olds))
	for _, f := range olds {
		pairs = append(pairs, f, rd.forms[f])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}
