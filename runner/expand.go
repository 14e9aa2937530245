package runner

import (
	"fmt"
	"strings"
)

// jobEnvPrefix is the only prefix a job's ${NAME} may reference, so that no
// job can send the server's own secrets (its etcd password) anywhere.
const jobEnvPrefix = "SHARDCRON_JOB_"

// expand replaces every ${NAME} in s with lookup(NAME). NAME must start with
// SHARDCRON_JOB_ and be set; "$$" is a literal "$"; any other "$" is kept as
// it is. It is the runner's private copy of config.Expand's rules, kept
// until config.Expand exists.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("%w: unterminated ${ at offset %d", ErrExpand, i)
			}
			name := s[i+2 : i+2+end]
			if !strings.HasPrefix(name, jobEnvPrefix) || len(name) == len(jobEnvPrefix) {
				return "", fmt.Errorf("%w: ${%s}: only variables named %s* may be referenced", ErrExpand, name, jobEnvPrefix)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("%w: ${%s} is not set in the server's environment", ErrExpand, name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
