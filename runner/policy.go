package runner

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/shardcron/shardcron/config"
)

// ExecPolicy says which exec jobs a replica runs. The job set is shared by
// every replica and written by whoever may write it in etcd; the policy is
// each replica's own, so a host can refuse to run programs it was not
// deployed for. The Runner enforces it on every exec run (a job written to
// etcd without `validate` meets it too). A refused run fails, with the
// reason as its detail; nothing is started.
//
// The allow-list pins the program file, not its arguments: an allowed
// shell or interpreter runs whatever its arguments say.
type ExecPolicy struct {
	// Disabled refuses every exec job (--exec=false).
	Disabled bool
	// Allow, when not empty, lists the programs exec jobs may start
	// (--exec-allow): a program name or path, found with the server's
	// PATH, or a directory ending in "/". New resolves every entry to an
	// absolute path with symlinks evaluated; a job's program is resolved
	// the same way when it runs (with the server's PATH, never the job's)
	// and must be one of those files or inside one of those directories.
	// No shell is involved unless a job names one as its command, and then
	// it must be allowed like any other program.
	Allow []string
	// EnvAllow, when not empty, lists the variables a job's env may set
	// (--exec-env-allow): a name, or a prefix ending in "*". Empty: with
	// Allow set, a job may set any variable but those that make a loader or
	// an interpreter run other code (DeniedEnv); without Allow, any.
	EnvAllow []string
}

// DeniedEnv are the variables (a name, or a prefix ending in "*") a job may
// not set while an allow-list is in force and EnvAllow is empty: they make
// the dynamic loader, a shell or an interpreter load code the job names,
// so an allowed program would run anything. The list cannot be complete;
// EnvAllow is the closed alternative.
var DeniedEnv = []string{
	"LD_*", "DYLD_*", "GCONV_PATH", "GLIBC_TUNABLES", "MALLOC_*", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
	"BASH_ENV", "ENV", "BASH_FUNC_*", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH",
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "PYTHON*", "NODE_OPTIONS", "NODE_PATH", "RUBYOPT", "RUBYLIB",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "LUA_*", "PHPRC", "PHP_INI_SCAN_DIR",
	"TCLLIBPATH", "GIT_*", "EDITOR", "VISUAL", "PAGER", "SSH_ASKPASS", "HOME", "XDG_CONFIG_HOME",
}

// envName is what a variable name may be, as config validates it.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// execPolicy is an ExecPolicy with its Allow entries resolved at New.
type execPolicy struct {
	disabled bool
	files    []string // resolved allowed programs
	dirs     []string // resolved allowed directories, without a trailing "/"
	envAllow []string
}

func (p execPolicy) allowList() bool { return len(p.files)+len(p.dirs) > 0 }

// resolve resolves p's Allow entries with path (the server's PATH).
func (p ExecPolicy) resolve(path string) (execPolicy, error) {
	r := execPolicy{disabled: p.Disabled, envAllow: p.EnvAllow}
	for _, a := range p.Allow {
		if strings.HasSuffix(a, "/") {
			if !filepath.IsAbs(a) {
				return r, fmt.Errorf("%w: --exec-allow %q: a directory entry must be an absolute path", ErrInvalidConfig, a)
			}
			d, err := filepath.EvalSymlinks(a)
			if err != nil {
				return r, fmt.Errorf("%w: --exec-allow %q: %v", ErrInvalidConfig, a, err)
			}
			r.dirs = append(r.dirs, filepath.Clean(d))
			continue
		}
		f, err := resolveProgram(a, path, "")
		if err != nil {
			return r, fmt.Errorf("%w: --exec-allow %q: %v", ErrInvalidConfig, a, err)
		}
		r.files = append(r.files, f)
	}
	for _, e := range p.EnvAllow {
		if n := strings.TrimSuffix(e, "*"); n == "PATH" || (n != "" && !envName.MatchString(n)) {
			return r, fmt.Errorf("%w: --exec-env-allow %q: not a variable name or prefix (and never PATH)", ErrInvalidConfig, e)
		}
	}
	return r, nil
}

// checkEnv refuses a job's env that sets PATH, or a variable the policy
// does not let it set.
func (p execPolicy) checkEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case !envName.MatchString(k):
			return fmt.Errorf("%w: env %q: not a variable name", ErrExecRefused, k)
		case k == "PATH":
			return fmt.Errorf("%w: env PATH: a job does not set PATH (programs are found with the server's PATH)", ErrExecRefused)
		case len(p.envAllow) > 0 && !matchName(p.envAllow, k):
			return fmt.Errorf("%w: env %s: not in --exec-env-allow", ErrExecRefused, k)
		case len(p.envAllow) == 0 && p.allowList() && matchName(DeniedEnv, k):
			return fmt.Errorf("%w: env %s: makes a loader or interpreter run other code; refused while --exec-allow is set (list the variables jobs may set with --exec-env-allow)", ErrExecRefused, k)
		}
	}
	return nil
}

// matchName reports whether name is one of list's names or starts with one
// of its prefixes (entries ending in "*").
func matchName(list []string, name string) bool {
	for _, e := range list {
		if p, ok := strings.CutSuffix(e, "*"); ok && strings.HasPrefix(name, p) || e == name {
			return true
		}
	}
	return false
}

// program resolves a job's program (command[0], started in dir) with the
// server's PATH and checks it against the allow-list. It returns the
// absolute path, symlinks evaluated, that the supervisor is to execute:
// the file that was checked.
func (p execPolicy) program(j config.Job, path string) (string, error) {
	if p.disabled {
		return "", fmt.Errorf("%w: exec jobs are disabled (--exec=false)", ErrExecRefused)
	}
	prog := j.Exec.Command[0]
	resolved, err := resolveProgram(prog, path, j.Exec.Dir)
	if err != nil {
		if p.allowList() {
			return "", fmt.Errorf("%w: %q is not in --exec-allow: %v", ErrExecRefused, prog, err)
		}
		return "", err
	}
	if !p.allowList() || slices.Contains(p.files, resolved) {
		return resolved, nil
	}
	for _, d := range p.dirs {
		if strings.HasPrefix(resolved, d+"/") {
			return resolved, nil
		}
	}
	if resolved != prog {
		prog = fmt.Sprintf("%s (%s)", prog, resolved)
	}
	return "", fmt.Errorf("%w: %q is not in --exec-allow", ErrExecRefused, prog)
}

// resolveProgram finds file the way execvp does, with path (the server's
// PATH) and relative to dir (where the job starts), and returns its
// absolute path with symlinks evaluated.
func resolveProgram(file, path, dir string) (string, error) {
	p, err := lookPath(file, path, dir)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		if dir == "" {
			if dir, err = os.Getwd(); err != nil {
				return "", err
			}
		}
		p = filepath.Join(dir, p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(r)
	switch {
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0:
		return "", fmt.Errorf("%q: not an executable file", p)
	}
	return r, nil
}
