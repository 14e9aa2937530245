package cronspec

import (
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // every replica resolves zones the same way, even without host tzdata

	"github.com/robfig/cron/v3"
)

// Schedule yields the fire times of a job.
type Schedule interface {
	// Next returns the first fire time strictly after t, on a whole second
	// and in the schedule's time zone, or the zero time if there is none.
	Next(t time.Time) time.Time
}

// MinEvery is the shortest @every interval accepted.
const MinEvery = time.Second

// horizonYears bounds every search for a fire time. A field combination that
// matches at all matches within 8 years (Feb 29 skips 2100); one more year
// covers the months before the first match.
const horizonYears = 9

// neverFiresFrom is where Parse starts looking for a first fire time. A fixed
// instant keeps Parse deterministic: a spec valid today is valid tomorrow.
var neverFiresFrom = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses spec (6 fields with seconds first, 5 fields, or a descriptor
// such as @hourly or "@every 10s") in the IANA time zone tz ("" means UTC).
// It never panics.
func Parse(spec, tz string) (s Schedule, err error) {
	defer func() {
		// robfig's parser is third-party code fed user input; a panic there
		// must surface as a bad spec, never take down apply or a replica.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w %q: %v", ErrSpec, spec, r)
		}
	}()
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	s, err = parse(strings.TrimSpace(spec), loc)
	if err != nil {
		return nil, err
	}
	if s.Next(neverFiresFrom).IsZero() {
		return nil, fmt.Errorf("%w: %q matches no time within %d years", ErrNeverFires, spec, horizonYears)
	}
	return s, nil
}

func parse(spec string, loc *time.Location) (Schedule, error) {
	if spec == "" {
		return nil, fmt.Errorf("%w: empty", ErrSpec)
	}
	upper := strings.ToUpper(spec)
	if strings.HasPrefix(upper, "TZ=") || strings.HasPrefix(upper, "CRON_TZ=") {
		return nil, fmt.Errorf("%w %q: a TZ= or CRON_TZ= prefix is not supported: use the job's timezone field", ErrSpec, spec)
	}
	if d, ok := strings.CutPrefix(spec, "@every"); ok {
		return parseEvery(spec, d, loc)
	}
	if strings.HasPrefix(spec, "@") {
		switch spec {
		case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		default:
			return nil, fmt.Errorf("%w %q: unknown descriptor (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)", ErrSpec, spec)
		}
	}
	if Hashed(spec) {
		return nil, fmt.Errorf("%w %q: H needs the job's name", ErrSpec, spec)
	}
	c, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrSpec, spec, err)
	}
	cs, ok := c.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w %q: unexpected schedule type %T", ErrSpec, spec, c)
	}
	return newSpec(cs, loc, isFixedTime(spec)), nil
}

func parseEvery(spec, arg string, loc *time.Location) (Schedule, error) {
	if arg == "" || (arg[0] != ' ' && arg[0] != '\t') {
		return nil, fmt.Errorf("%w %q: want @every <duration>, such as @every 10s", ErrSpec, spec)
	}
	d, err := time.ParseDuration(strings.TrimSpace(arg))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrSpec, spec, err)
	}
	if d < MinEvery {
		return nil, fmt.Errorf("%w %q: the interval must be at least %v", ErrSpec, spec, MinEvery)
	}
	if d%time.Second != 0 {
		return nil, fmt.Errorf("%w %q: the interval must be a whole number of seconds", ErrSpec, spec)
	}
	return every{sec: int64(d / time.Second), loc: loc}, nil
}

// isFixedTime reports whether a spec robfig accepted is fixed-time in the
// sense of docs/design.md: neither its minute nor its hour field is a wildcard
// (* or ?) or a step (/). @hourly is the only descriptor that is not.
func isFixedTime(spec string) bool {
	if strings.HasPrefix(spec, "@") {
		return spec != "@hourly"
	}
	f := strings.Fields(spec)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 6 {
		return false
	}
	return !strings.ContainsAny(f[1], "*?/") && !strings.ContainsAny(f[2], "*?/")
}

var locations sync.Map // name -> *time.Location

// LoadLocation returns the IANA time zone tz ("" and "UTC" are UTC). It
// rejects "Local", which differs from host to host. Zones are cached: a
// 100,000-job file names a handful of zones many times.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" || tz == "UTC" {
		return time.UTC, nil
	}
	if l, ok := locations.Load(tz); ok {
		return l.(*time.Location), nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf("%w %q: the host's local zone differs between replicas; name an IANA zone such as Europe/Berlin", ErrTimezone, tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w %q: not an IANA time zone name such as Europe/Berlin", ErrTimezone, tz)
	}
	locations.Store(tz, loc)
	return loc, nil
}
