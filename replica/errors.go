package replica

import "errors"

// Errors of the package, checked with errors.Is.
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("replica: invalid config")
	// ErrRunTwice: Run was called on a Replica that already ran.
	ErrRunTwice = errors.New("replica: Run called twice")
)
