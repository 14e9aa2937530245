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
// The item variables (VarItem, VarItems, VarItemName) are allowed too: only
// a sharded job's fields hold them (validation), and lookup answers them.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	err := scanVars(s, true, func(lit string) { b.WriteString(lit) }, func(name string) error {
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
// any environment: bad syntax or a name outside SHARDCRON_JOB_* (and, where
// items is true, the item variables).
func checkVars(s string, items bool) error {
	if !strings.Contains(s, "$") {
		return nil
	}
	return scanVars(s, items, func(string) {}, func(string) error { return nil })
}

// ExpandItem replaces each ${SHARDCRON_ITEM}, ${SHARDCRON_ITEMS} and
// ${SHARDCRON_ITEM_NAME} in s with the item's value and leaves everything
// else as it is: for an exec command's arguments, where any other "$" is the
// program's own (a shell's ${HOME}).
func ExpandItem(s string, it Item) string {
	if it.IsZero() || !strings.Contains(s, "${SHARDCRON_ITEM") {
		return s
	}
	for _, name := range itemVars {
		v, _ := it.Var(name)
		s = strings.ReplaceAll(s, "${"+name+"}", v)
	}
	return s
}

// scanVars walks s, passing literal text to lit and each allowed variable
// name to ref: SHARDCRON_JOB_* and, where items is true, the item variables.
func scanVars(s string, items bool, lit func(string), ref func(string) error) error {
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
			switch {
			case isItemVar(name) && !items:
				return fmt.Errorf("%w: ${%s}: only a sharded job's (items or item_names) target names an item", ErrVariableNotAllowed, name)
			case isItemVar(name):
			case !strings.HasPrefix(name, JobVarPrefix) || len(name) == len(JobVarPrefix):
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
