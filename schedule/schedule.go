// Package schedule turns a job's cron spec and time zone into fire times.
//
// PRELIMINARY: this first cut only wraps robfig/cron's parser; the DST rules
// of DESIGN.md ("Time"), epoch-anchored @every and the rejections of issue 4
// are still to come. The API (Parse, Schedule.Next) is fixed.
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule yields the fire times of a job.
type Schedule interface {
	// Next returns the first fire time strictly after t, or the zero time if
	// there is none.
	Next(t time.Time) time.Time
}

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses spec (6 fields with seconds first, 5 fields, or a descriptor
// such as @hourly or @every 10s) in the IANA time zone tz ("" means UTC).
func Parse(spec, tz string) (Schedule, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("schedule: time zone %q: %w", tz, err)
		}
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule: %q: %w", spec, err)
	}
	return inLocation{s, loc}, nil
}

type inLocation struct {
	s   cron.Schedule
	loc *time.Location
}

func (l inLocation) Next(t time.Time) time.Time { return l.s.Next(t.In(l.loc)) }
