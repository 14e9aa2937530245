package config

import (
	"fmt"
	"strings"
)

// JobVarPrefix starts the name of every variable a job may reference as
// ${NAME}: no job can send the server's own settings (its etcd password)
// anywhere.
const JobVarPrefix = "SHARDCRON_JOB_"

// Expand replaces each ${NAME} in s with lookup(NAME), for the runners to
// call when a job runs (on the url, header values, body and exec env values).
// NAME must start with SHARDCRON_JOB_ (ErrVariableNotAllowed) and be set
// (ErrVariableUnset). "$$" is a literal "$"; any other "$" is kept as it is.
// A ${ without a closing } or around something other than a variable name is
// ErrVariableSyntax. Validation has already rejected all but unset variables.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	err := scanVars(s, func(lit string) { b.WriteString(lit) }, func(name string) error {
		v, ok := lookup(name)
		if !ok {
			return fmt.Errorf("%w: ${%s} is not set in the server's environment", ErrVariableUnset, name)
		}
		b.WriteString(v)
		return nil
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// checkVars reports the first reference in s that Expand would reject for
// any environment: bad syntax or a name outside SHARDCRON_JOB_*.
func checkVars(s string) error {
	if !strings.Contains(s, "$") {
		return nil
	}
	return scanVars(s, func(string) {}, func(string) error { return nil })
}

// scanVars walks s, passing literal text to lit and each allowed variable
// name to ref.
func scanVars(s string, lit func(string), ref func(string) error) error {
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			lit(s)
			return nil
		}
		lit(s[:i])
		switch s[i+1] {
		case '$':
			lit("$")
			s = s[i+2:]
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return fmt.Errorf("%w: ${ without a closing }", ErrVariableSyntax)
			}
			name := s[i+2 : i+2+end]
			if !isVarName(name) {
				return fmt.Errorf("%w: ${%s}: not a variable name (letters, digits and _)", ErrVariableSyntax, name)
			}
			if !strings.HasPrefix(name, JobVarPrefix) || len(name) == len(JobVarPrefix) {
				return fmt.Errorf("%w: ${%s}: only variables named %s* are expanded", ErrVariableNotAllowed, name, JobVarPrefix)
			}
			if err := ref(name); err != nil {
				return err
			}
			s = s[i+3+end:]
		default:
			lit("$")
			s = s[i+1:]
		}
	}
}

func isVarName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
