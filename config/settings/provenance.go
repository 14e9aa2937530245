package settings

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/shardcron/shardcron/config"
)

// A setting's value comes from a flag, an environment variable, the
// --config file or the default. A value found invalid is reported where it
// was written — "flag --lease-ttl: ...", "environment SHARDCRON_LEASE_TTL:
// ...", `node.yaml:3: field "lease_ttl": ...` — so the user knows what to
// change; a default found invalid (rare: a default that is wrong only with
// another setting) keeps `field "key"`.

// source is where one setting's value came from.
type source struct {
	flag string // "--lease-ttl"
	env  string // "SHARDCRON_LEASE_TTL"
	file string
	line int
}

// String names the source for a message.
func (s source) String() string {
	switch {
	case s.flag != "":
		return "flag " + s.flag
	case s.env != "":
		return "environment " + s.env
	case s.file != "" && s.line > 0:
		return fmt.Sprintf("%s:%d", s.file, s.line)
	case s.file != "":
		return s.file
	}
	return ""
}

// sources maps setting keys to where their values came from: the highest
// level that set each.
type sources map[string]source

// locate rewrites the problems of err that name a setting (Error.Field,
// with no file yet) to name where the setting was written. Other errors
// pass as they are.
func (src sources) locate(err error) error {
	errs, ok := err.(config.Errors)
	if !ok {
		return err
	}
	out := make(config.Errors, len(errs))
	for i, e := range errs {
		c := *e
		if s, ok := src[e.Field]; ok && e.File == "" {
			switch {
			case s.flag != "" || s.env != "":
				c.Msg, c.Field = s.String()+": "+c.Msg, ""
			case s.file != "":
				c.File, c.Line = s.file, s.line
			}
		}
		out[i] = &c
	}
	return out
}

// fileLines returns the line of each key the --config file at path sets
// (nil when it cannot be read; resolve reports that).
func fileLines(path string) map[string]int {
	_, lines, err := loadNodeFileKeys(DefaultNode(), path)
	if err != nil {
		return nil
	}
	return lines
}

// configSource is where the --config path itself came from.
func configSource(fs *pflag.FlagSet, env func(string) string) (string, source) {
	if f := fs.Lookup(ConfigFlag); f != nil && f.Changed {
		return f.Value.String(), source{flag: "--" + ConfigFlag}
	}
	if v := env(EnvPrefix + "CONFIG"); v != "" {
		return v, source{env: EnvPrefix + "CONFIG"}
	}
	return "", source{}
}

// Describe names where the setting key (snake case, as in the file) of
// the command whose flags are fs takes its value from: "flag --jobs",
// "environment SHARDCRON_JOBS", `node.yaml:4: field "jobs"`, or `setting
// "jobs"` when it has its default. Commands use it for errors found after
// resolving, such as a file setting naming a file that cannot be read.
func Describe(fs *pflag.FlagSet, env func(string) string, key string) string {
	if env == nil {
		env = func(string) string { return "" }
	}
	flag := strings.ReplaceAll(key, "_", "-")
	if f := fs.Lookup(flag); f != nil && f.Changed {
		return "flag --" + flag
	}
	if v := env(EnvPrefix + strings.ToUpper(key)); v != "" {
		return "environment " + EnvPrefix + strings.ToUpper(key)
	}
	if path, _ := configSource(fs, env); path != "" {
		if line, ok := fileLines(path)[key]; ok {
			return fmt.Sprintf("%s:%d: field %q", path, line, key)
		}
	}
	return fmt.Sprintf("setting %q", key)
}
