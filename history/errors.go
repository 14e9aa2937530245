package history

import "errors"

// Errors of the package, checked with errors.Is.
var (
	// ErrFormat: a history segment this build cannot decode (damaged, or
	// written in a newer format).
	ErrFormat = errors.New("history: unsupported format")
)
