package cronspec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("bad fixture time %q: %v", s, err)
	}
	return v
}

// TestNextDST pins fire times across the spring-forward and fall-back days
// of three zones, for fixed-time jobs (ISC cron: a skipped time runs once
// right after the gap, a repeated time once at its earlier instant) and
// interval jobs (the wall clock, through both). Offsets in the expected
// times show which side of each transition a fire falls on.
//
// 2026 transitions: America/New_York 03-08 02:00 EST->03:00 EDT and 11-01
// 02:00 EDT->01:00 EST; Europe/Berlin 03-29 02:00 CET->03:00 CEST and 10-25
// 03:00 CEST->02:00 CET; Australia/Sydney 04-05 03:00 AEDT->02:00 AEST and
// 10-04 02:00 AEST->03:00 AEDT.
func TestNextDST(t *testing.T) {
	tests := []struct {
		name, tz, spec, from string
		want                 []string
	}{
		// New York, spring forward: 02:00-02:59 does not exist.
		{"ny spring fixed in gap", "America/New_York", "30 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"ny spring fixed at gap start", "America/New_York", "0 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"}},
		{"ny spring two fixed times in gap run once", "America/New_York", "0,30 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"ny spring gap time and gap end coincide", "America/New_York", "0 2,3 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T03:00:00-04:00"}},
		{"ny spring fixed with seconds in gap", "America/New_York", "15 30 2 * * *", "2026-03-08T01:59:59-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:15-04:00"}},
		{"ny spring fixed around gap", "America/New_York", "30 1,3 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"}},
		{"ny spring hourly skips the gap", "America/New_York", "0 * * * *", "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"ny spring @hourly is an interval job", "America/New_York", "@hourly", "2026-03-08T01:30:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"ny spring seconds interval", "America/New_York", "*/10 * * * * *", "2026-03-08T01:59:40-05:00",
			[]string{"2026-03-08T01:59:50-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:10-04:00"}},
		{"ny spring interval minute in gap hour", "America/New_York", "*/30 2 * * *", "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"}},

		// New York, fall back: 01:00-01:59 happens twice.
		{"ny fall fixed in repeated hour", "America/New_York", "30 1 * * *", "2026-11-01T00:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"ny fall fixed not rerun from first pass", "America/New_York", "30 1 * * *", "2026-11-01T01:45:00-04:00",
			[]string{"2026-11-02T01:30:00-05:00"}},
		{"ny fall fixed not run in second pass", "America/New_York", "15 1 * * *", "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-02T01:15:00-05:00"}},
		{"ny fall fixed after repeated hour", "America/New_York", "0 2 * * *", "2026-11-01T00:00:00-04:00",
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-02T02:00:00-05:00"}},
		{"ny fall @daily", "America/New_York", "@daily", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00"}},
		{"ny fall hourly runs both 01:00", "America/New_York", "0 * * * *", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"ny fall minute interval follows the wall clock", "America/New_York", "*/20 * * * *", "2026-11-01T01:30:00-04:00",
			[]string{"2026-11-01T01:40:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:20:00-05:00", "2026-11-01T01:40:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"ny fall seconds interval", "America/New_York", "*/10 * * * * *", "2026-11-01T01:59:45-04:00",
			[]string{"2026-11-01T01:59:50-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:00:10-05:00"}},
		{"ny fall hour fixed minute wildcard is interval", "America/New_York", "0 */30 1 * * *", "2026-11-01T01:15:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:00:00-05:00"}},

		// Berlin.
		{"berlin spring fixed in gap", "Europe/Berlin", "30 2 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"berlin spring fixed range in gap", "Europe/Berlin", "0 2 29 3 *", "2026-01-01T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2027-03-29T02:00:00+02:00"}},
		{"berlin spring hourly", "Europe/Berlin", "0 0 * * * *", "2026-03-29T01:30:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"berlin fall fixed in repeated hour", "Europe/Berlin", "30 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin fall fixed list in repeated hour", "Europe/Berlin", "0,45 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:45:00+02:00", "2026-10-26T02:00:00+01:00"}},
		{"berlin fall interval in repeated hour", "Europe/Berlin", "*/30 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:00:00+01:00"}},

		// Sydney: fall back in April, spring forward in October.
		{"sydney fall fixed in repeated hour", "Australia/Sydney", "30 2 * * *", "2026-04-05T00:00:00+11:00",
			[]string{"2026-04-05T02:30:00+11:00", "2026-04-06T02:30:00+10:00"}},
		{"sydney fall hourly", "Australia/Sydney", "0 * * * *", "2026-04-05T01:30:00+11:00",
			[]string{"2026-04-05T02:00:00+11:00", "2026-04-05T02:00:00+10:00", "2026-04-05T03:00:00+10:00"}},
		{"sydney spring fixed in gap", "Australia/Sydney", "30 2 * * *", "2026-10-04T00:00:00+10:00",
			[]string{"2026-10-04T03:00:00+11:00", "2026-10-05T02:30:00+11:00"}},
		{"sydney spring seconds interval", "Australia/Sydney", "*/10 * * * * *", "2026-10-04T01:59:45+10:00",
			[]string{"2026-10-04T01:59:50+10:00", "2026-10-04T03:00:00+11:00", "2026-10-04T03:00:10+11:00"}},
		{"sydney spring weekly on transition day", "Australia/Sydney", "30 2 * * sun", "2026-09-28T00:00:00+10:00",
			[]string{"2026-10-04T03:00:00+11:00", "2026-10-11T02:30:00+11:00"}},

		// Midnight skipped (America/Havana springs forward at 00:00 on 2026-03-08).
		{"havana @daily at skipped midnight", "America/Havana", "@daily", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00"}},

		// No DST: plain calendar behaviour.
		{"utc leap day", "UTC", "0 0 29 2 *", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"utc leap day across 2100", "", "0 0 29 2 *", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"utc dom or dow", "UTC", "0 12 13 * fri", "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T12:00:00Z", "2026-02-13T12:00:00Z", "2026-02-20T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-06T12:00:00Z", "2026-03-13T12:00:00Z"}},
		{"utc 31st skips short months", "UTC", "0 0 31 * *", "2026-01-31T00:00:00Z",
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"utc sub-second start", "UTC", "* * * * * *", "2026-01-01T00:00:00.5Z",
			[]string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"utc year end", "UTC", "59 59 23 31 12 *", "2026-06-01T00:00:00Z",
			[]string{"2026-12-31T23:59:59Z", "2027-12-31T23:59:59Z"}},
		{"before 1970", "UTC", "0 0 1 1 *", "1960-06-01T00:00:00Z",
			[]string{"1961-01-01T00:00:00Z"}},

		// @every: multiples of d since the epoch, whatever the zone.
		{"every hour", "Asia/Kolkata", "@every 1h", "2026-03-08T10:10:10+05:30",
			[]string{"2026-03-08T10:30:00+05:30", "2026-03-08T11:30:00+05:30"}},
		{"every 7s", "UTC", "@every 7s", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:00:07Z", "2026-01-01T00:00:14Z"}},
		{"every across dst", "America/New_York", "@every 30m", "2026-11-01T01:40:00-04:00",
			[]string{"2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.spec, tc.tz)
			if err != nil {
				t.Fatalf("Parse(%q, %q): %v", tc.spec, tc.tz, err)
			}
			at := mustTime(t, tc.from)
			for i, w := range tc.want {
				want := mustTime(t, w)
				got := s.Next(at)
				if !got.Equal(want) || got.Format(time.RFC3339) != want.Format(time.RFC3339) {
					t.Fatalf("fire %d after %s: got %s, want %s", i, at.Format(time.RFC3339), got.Format(time.RFC3339), w)
				}
				at = got
			}
		})
	}
}

func TestEveryAnchoredToEpoch(t *testing.T) {
	s, err := Parse("@every 7m13s", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const d = 7*60 + 13
	base := mustTime(t, "2026-05-01T12:00:00Z")
	// Replicas asking from different instants land on the same grid.
	for _, off := range []time.Duration{0, time.Nanosecond, 999 * time.Millisecond, 3 * time.Minute, 6*time.Hour + 17*time.Second} {
		at := base.Add(off)
		got := s.Next(at)
		if got.Unix()%d != 0 || !got.After(at) || got.Sub(at) > d*time.Second {
			t.Fatalf("Next(%v) = %v: not the next multiple of %ds since the epoch", at, got, d)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		spec, tz string
		is       error
		contains string
	}{
		{"", "", ErrSpec, "empty"},
		{"   ", "", ErrSpec, "empty"},
		{"TZ=", "", ErrSpec, "use the job's timezone field"},
		{"TZ=Europe/Berlin 0 * * * *", "", ErrSpec, "use the job's timezone field"},
		{"CRON_TZ=UTC 0 * * * *", "", ErrSpec, "use the job's timezone field"},
		{"cron_tz=UTC", "", ErrSpec, "use the job's timezone field"},
		{"@every", "", ErrSpec, "want @every <duration>"},
		{"@every0s", "", ErrSpec, "want @every <duration>"},
		{"@every 0s", "", ErrSpec, "at least 1s"},
		{"@every -5m", "", ErrSpec, "at least 1s"},
		{"@every 500ms", "", ErrSpec, "at least 1s"},
		{"@every 1.5s", "", ErrSpec, "whole number of seconds"},
		{"@every soon", "", ErrSpec, "invalid duration"},
		{"@reboot", "", ErrSpec, "unknown descriptor"},
		{"@daily 5", "", ErrSpec, "unknown descriptor"},
		{"* * * *", "", ErrSpec, "expected 5 to 6 fields"},
		{"* * * * * * *", "", ErrSpec, "expected 5 to 6 fields"},
		{"60 * * * *", "", ErrSpec, "above maximum"},
		{"* 24 * * *", "", ErrSpec, "above maximum"},
		{"0 0 0 * *", "", ErrSpec, "below minimum"},
		{"0 0 * 13 *", "", ErrSpec, "above maximum"},
		{"0 0 * * 7", "", ErrSpec, "above maximum"},
		{"*/0 * * * *", "", ErrSpec, "step of range should be a positive number"},
		{"5-1 * * * *", "", ErrSpec, "beyond end of range"},
		{"a * * * *", "", ErrSpec, "failed to parse int"},
		{"0 0 30 2 *", "", ErrNeverFires, "matches no time within 9 years"},
		{"0 0 31 4 *", "", ErrNeverFires, "matches no time"},
		{"0 0 31 2,4,6,9,11 *", "", ErrNeverFires, "matches no time"},
		{"0 * * * *", "Mars/Olympus_Mons", ErrTimezone, "not an IANA time zone"},
		{"0 * * * *", "Local", ErrTimezone, "differs between replicas"},
		{"0 * * * *", "../../etc/passwd", ErrTimezone, "not an IANA time zone"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.spec, tc.tz)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("Parse(%q, %q) = %v; want %v containing %q", tc.spec, tc.tz, err, tc.is, tc.contains)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, spec := range []string{
		"0 0 29 2 *", "0 0 31 * *", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
		"@every 1s", "@every 1h30m", "  0 * * * *  ", "0 0 * JAN-mar MON-fri", "0 0 ? * *", "0 0 1-31/2 * *",
		"0 0 30 2 1", // day of month or day of week: every Monday in February
	} {
		s, err := Parse(spec, "Europe/Berlin")
		if err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
			continue
		}
		if s.Next(time.Now()).IsZero() {
			t.Errorf("Parse(%q).Next(now) is zero", spec)
		}
	}
}
