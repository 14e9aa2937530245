package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// Defaults and bounds of a job's fields.
const (
	DefaultTimezone    = "UTC"
	DefaultMethod      = "POST"
	DefaultConcurrency = ConcurrencyForbid
	DefaultMisfire     = MisfireRunOnce
	// DefaultTimeout bounds a run whose job sets no timeout.
	DefaultTimeout = time.Minute
	// MaxTimeout is the longest timeout a job may set.
	MaxTimeout = 24 * time.Hour
	// MaxStartingDeadline is the longest starting deadline a job may set.
	MaxStartingDeadline = 30 * 24 * time.Hour
	// MaxAttempts bounds retries.attempts.
	MaxAttempts = 10
	// DefaultBackoff is the wait before the first retry when retries sets
	// none; MaxBackoff bounds it.
	DefaultBackoff = time.Second
	MaxBackoff     = time.Hour
	// MaxMaxRuns bounds max_runs: the last of a job's ticks is found by a
	// walk of max_runs ticks.
	MaxMaxRuns = 100_000
	// MinJitter and MaxJitter bound jitter: offsets are whole seconds, so
	// under 2s there is none.
	MinJitter = 2 * time.Second
	MaxJitter = 24 * time.Hour
	// gapWalk is how many ticks of a schedule are walked to find its
	// shortest gap, which a jitter may not exceed.
	gapWalk = 1000
)

var (
	jobName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// reservedEnv are set by the runner on every exec run.
	reservedEnv = []string{"SHARDCRON_CLUSTER", "SHARDCRON_JOB", "SHARDCRON_TICK", "SHARDCRON_SHARD", "SHARDCRON_FENCING_TOKEN", "SHARDCRON_NODE",
		"SHARDCRON_TRIGGER", "SHARDCRON_TRIGGER_ID", "SHARDCRON_ATTEMPT", VarItem, VarItems, VarItemName}
	anyVar = regexp.MustCompile(`\$\{[^}]*\}`)
)

// IsEnvName says whether name may name an environment variable of an exec
// job: letters, digits and _, not starting with a digit.
func IsEnvName(name string) bool { return envName.MatchString(name) }

// SetDefaults fills in every field the jobs file may omit: timezone UTC,
// method POST, timeout 1m, concurrency forbid, misfire run_once, and a
// retry backoff of 1s when retries are given. A starting
// deadline of 0 (the default) means none: a late tick runs however late.
func (j *Job) SetDefaults() {
	if j.Timezone == "" {
		j.Timezone = DefaultTimezone
	}
	if j.HTTP != nil && j.HTTP.Method == "" {
		j.HTTP.Method = DefaultMethod
	}
	if j.Timeout == 0 {
		j.Timeout = Duration(DefaultTimeout)
	}
	if j.Concurrency == "" {
		j.Concurrency = DefaultConcurrency
	}
	if j.Misfire == "" {
		j.Misfire = DefaultMisfire
	}
	if j.Retries != nil && j.Retries.Backoff == 0 {
		j.Retries.Backoff = Duration(DefaultBackoff)
	}
	j.Notify.setDefaults()
}

// Validate checks a job whose defaults are set (SetDefaults), as ParseJobs
// does, and returns Errors (without file or line) or nil.
func (j Job) Validate() error {
	var errs Errors
	label := fmt.Sprintf("%q", j.Name)
	validateJob(&j, func(field, msg string, cause error) {
		errs = append(errs, &Error{Job: label, Field: field, Msg: msg, Err: cause})
	})
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// validateJob reports each problem of j through report, by field path.
func validateJob(j *Job, report func(field, msg string, cause error)) {
	bad := func(field, format string, args ...any) { report(field, fmt.Sprintf(format, args...), nil) }

	switch {
	case j.Name == "":
		bad("name", "is required")
	case len(j.Name) > MaxNameLen:
		bad("name", "is %d characters, more than the limit of %d", len(j.Name), MaxNameLen)
	case !jobName.MatchString(j.Name):
		bad("name", "%q must match [a-z0-9][a-z0-9._-]* (lower case letters, digits, '.', '_' and '-')", j.Name)
	}

	tz := j.Timezone
	if _, err := cronspec.LoadLocation(tz); err != nil {
		report("timezone", strings.TrimPrefix(err.Error(), "cronspec: "), err)
		tz = DefaultTimezone // still check the spec itself
	}
	var sched cronspec.Schedule
	switch {
	case !j.At.IsZero() && strings.TrimSpace(j.Schedule) != "":
		bad("at", "the job also has a schedule: give exactly one of schedule or at (a one-shot job)")
	case !j.At.IsZero():
	case strings.TrimSpace(j.Schedule) == "":
		bad("schedule", "is required (or at, for a one-shot job)")
	default:
		var err error
		if sched, err = cronspec.ParseJob(j.Schedule, tz, j.Name); err != nil {
			report("schedule", strings.TrimPrefix(err.Error(), "cronspec: "), err)
		}
	}
	validateWhen(j, sched, bad)
	validateItems(j, bad)

	var targets []string
	if j.HTTP != nil {
		targets = append(targets, "http")
		validateHTTP(j.HTTP, j.ItemCount() > 0, report, bad)
	}
	if j.Exec != nil {
		targets = append(targets, "exec")
		validateExec(j.Exec, bad)
	}
	if j.Func != "" {
		targets = append(targets, "func")
		if strings.ContainsFunc(j.Func, func(r rune) bool { return r <= ' ' }) {
			bad("func", "%q: a function name has no spaces or control characters", j.Func)
		}
	}
	switch len(targets) {
	case 0:
		bad("", "has nothing to run: give exactly one of http, exec or func")
	case 1:
	default:
		bad(targets[1], "the job also has %s: give exactly one of http, exec or func", targets[0])
	}

	validatePolicy(j, bad)
	validateNotify(j.Notify, "notify", report)
	if len(j.Env) > 0 && j.Exec == nil {
		bad("env", "is passed only to exec jobs")
	}
	for _, k := range sortedKeys(j.Env) {
		field := "env." + k
		switch {
		case !envName.MatchString(k):
			bad(field, "not a variable name (letters, digits and _, not starting with a digit)")
		case slices.Contains(reservedEnv, k):
			bad(field, "is set by shardcron on every run")
		case k == "PATH":
			bad(field, "a job does not set PATH: programs are found with the server's PATH (give command[0] as an absolute path instead)")
		}
		if strings.IndexByte(j.Env[k], 0) >= 0 {
			bad(field, "holds a NUL byte")
		}
		checkExpansion(field, j.Env[k], j.ItemCount() > 0, report)
	}
}

// validatePolicy checks how and when a job runs: timeout, concurrency,
// misfire, starting deadline and retries.
func validatePolicy(j *Job, bad func(field, format string, args ...any)) {
	switch {
	case j.Timeout <= 0:
		bad("timeout", "must be more than 0")
	case j.Timeout.D() > MaxTimeout:
		bad("timeout", "%v is more than the limit of %v", j.Timeout, Duration(MaxTimeout))
	}
	if !slices.Contains([]Concurrency{ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace}, j.Concurrency) {
		bad("concurrency", "must be one of allow, forbid, replace")
	}
	if !slices.Contains([]Misfire{MisfireSkip, MisfireRunOnce, MisfireRunAll}, j.Misfire) {
		bad("misfire", "must be one of skip, run_once, run_all")
	}
	switch {
	case j.StartingDeadline < 0:
		bad("starting_deadline", "must not be negative")
	case j.StartingDeadline.D() > MaxStartingDeadline:
		bad("starting_deadline", "%v is more than the limit of %v", j.StartingDeadline, Duration(MaxStartingDeadline))
	}
	validateRetries(j.Retries, bad)
}

// validateWhen checks when a job may run: its one-shot instant, its
// window, max_runs and jitter. sched is the parsed spec, nil for a
// one-shot job or a spec that does not parse.
func validateWhen(j *Job, sched cronspec.Schedule, bad func(field, format string, args ...any)) {
	if !j.At.IsZero() {
		if j.At.Nanosecond() != 0 {
			bad("at", "%s must be a whole second", j.At.Format(time.RFC3339Nano))
		}
		for _, f := range []struct {
			field string
			set   bool
		}{{"start_at", !j.StartAt.IsZero()}, {"end_at", !j.EndAt.IsZero()}, {"max_runs", j.MaxRuns != 0}} {
			if f.set {
				bad(f.field, "a one-shot job (at) runs once, at its instant: it takes no %s", f.field)
			}
		}
	}
	if !j.StartAt.IsZero() && !j.EndAt.IsZero() && j.EndAt.Before(j.StartAt) {
		bad("end_at", "%s is before start_at %s", j.EndAt.Format(time.RFC3339), j.StartAt.Format(time.RFC3339))
	}
	switch {
	case j.MaxRuns < 0:
		bad("max_runs", "must be at least 1 (omit it for no limit)")
	case j.MaxRuns > MaxMaxRuns:
		bad("max_runs", "%d is more than the limit of %d", j.MaxRuns, MaxMaxRuns)
	}
	switch {
	case j.Jitter == 0:
	case j.Jitter < 0:
		bad("jitter", "must not be negative")
	case j.Jitter.D() < MinJitter:
		bad("jitter", "%v is less than %v: offsets are whole seconds in [0, jitter)", j.Jitter, Duration(MinJitter))
	case j.Jitter.D()%time.Second != 0:
		bad("jitter", "%v is not a whole number of seconds", j.Jitter)
	case j.Jitter.D() > MaxJitter:
		bad("jitter", "%v is more than the limit of %v", j.Jitter, Duration(MaxJitter))
	case sched != nil:
		// A tick delayed past the next one would overtake it.
		if gap := cronspec.MinGap(sched, gapFrom, gapWalk); gap > 0 && j.Jitter.D() > gap {
			bad("jitter", "%v is longer than the %v between two ticks of the schedule: a delayed tick would overtake the next", j.Jitter, Duration(gap))
		}
	}
}

// gapFrom is where the walk for a schedule's shortest gap starts: a fixed
// instant, so a file valid today is valid tomorrow.
var gapFrom = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

func validateHTTP(h *HTTPTarget, items bool, report func(field, msg string, cause error), bad func(field, format string, args ...any)) {
	if h.URL == "" {
		bad("http.url", "is required")
	} else if checkExpansion("http.url", h.URL, items, report) {
		if msg := checkURL(h.URL); msg != "" {
			bad("http.url", "%s", msg)
		}
	}
	if h.Method == "" {
		bad("http.method", "is required")
	} else if !isToken(h.Method) {
		bad("http.method", "%q is not an HTTP method", h.Method)
	}
	for _, k := range sortedKeys(h.Headers) {
		field := "http.headers." + k
		v := h.Headers[k]
		switch {
		case !isToken(k):
			bad(field, "not a valid header name")
		case strings.HasPrefix(strings.ToLower(k), "shardcron-"):
			bad(field, "Shardcron-* headers are set by shardcron on every run")
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			bad(field, "a header value holds no line breaks or NUL bytes")
		}
		checkExpansion(field, v, items, report)
	}
	checkExpansion("http.body", h.Body, items, report)
	if h.FollowRedirects != "" && !slices.Contains([]Redirects{RedirectsNone, RedirectsSameHost, RedirectsAny}, h.FollowRedirects) {
		bad("http.follow_redirects", "%q must be one of none, same_host, any", h.FollowRedirects)
	}
	seen := map[int]bool{}
	for i, code := range h.ExpectStatus {
		field := fmt.Sprintf("http.expect_status[%d]", i)
		switch {
		case code < 100 || code > 599:
			bad(field, "%d is not an HTTP status (100 to 599)", code)
		case seen[code]:
			bad(field, "%d is listed twice", code)
		}
		seen[code] = true
	}
}

func validateRetries(r *Retries, bad func(field, format string, args ...any)) {
	if r == nil {
		return
	}
	switch {
	case r.Attempts < 1:
		bad("retries.attempts", "is required: the most attempts of one tick, the first included (1 to %d)", MaxAttempts)
	case r.Attempts > MaxAttempts:
		bad("retries.attempts", "%d is more than the limit of %d", r.Attempts, MaxAttempts)
	}
	switch {
	case r.Backoff <= 0:
		bad("retries.backoff", "must be more than 0")
	case r.Backoff.D() > MaxBackoff:
		bad("retries.backoff", "%v is more than the limit of %v", r.Backoff, Duration(MaxBackoff))
	}
}

func validateExec(e *ExecTarget, bad func(field, format string, args ...any)) {
	switch {
	case len(e.Command) == 0:
		bad("exec.command", "is required: the program and its arguments, such as [\"/usr/local/bin/sweep\", \"--fast\"]")
	case strings.TrimSpace(e.Command[0]) == "":
		bad("exec.command[0]", "the program must not be empty")
	}
	for i, a := range e.Command {
		if strings.IndexByte(a, 0) >= 0 {
			bad(fmt.Sprintf("exec.command[%d]", i), "holds a NUL byte")
		}
	}
	if e.Dir != "" && !filepath.IsAbs(e.Dir) {
		bad("exec.dir", "%q must be an absolute path", e.Dir)
	}
}

// checkExpansion reports a ${NAME} in s that Expand would refuse whatever the
// environment, and says whether s is clean.
func checkExpansion(field, s string, items bool, report func(field, msg string, cause error)) bool {
	err := checkVars(s, items)
	if err == nil {
		return true
	}
	msg := err.Error()
	for _, sentinel := range []error{ErrVariableNotAllowed, ErrVariableSyntax} {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	if errors.Is(err, ErrVariableNotAllowed) {
		msg = strings.Replace(msg, ": only", " is not allowed: only", 1)
	}
	report(field, msg, err)
	return false
}

// checkURL checks what can be checked before expansion: an absolute http or
// https URL with a host. A URL that starts with a variable takes its scheme
// and host from it, so only the rest is checked here; the runner checks the
// expanded URL.
func checkURL(raw string) string {
	probe := raw
	if strings.HasPrefix(raw, "${") {
		probe = "http://placeholder" + raw[strings.IndexByte(raw, '}')+1:]
	}
	probe = anyVar.ReplaceAllString(probe, "x")
	u, err := url.Parse(probe)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("%q is not a URL: %v", raw, err)
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return fmt.Sprintf("%q must be an absolute http:// or https:// URL", raw)
	}
	return ""
}

// isToken reports whether s is an RFC 9110 token (method and header names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
