package cronspec

import "errors"

// Errors returned by Parse and LoadLocation, checked with errors.Is. The
// returned error's text names the spec or zone and the reason.
var (
	// ErrSpec: the spec is malformed (syntax, range, unknown descriptor,
	// a TZ=/CRON_TZ= prefix, or a bad @every duration).
	ErrSpec = errors.New("cronspec: invalid spec")
	// ErrNeverFires: the spec parses but matches no time (such as
	// "0 0 30 2 *").
	ErrNeverFires = errors.New("cronspec: never fires")
	// ErrTimezone: the time zone is not a known IANA name.
	ErrTimezone = errors.New("cronspec: unknown time zone")
)
