package httpauth

import "errors"

// Errors of the package, checked with errors.Is.
var (
	// ErrInvalidConfig: no token, or an Open path that is not openable.
	ErrInvalidConfig = errors.New("httpauth: invalid config")
	// ErrTokenFile: a token file cannot be read or holds a bad token. The
	// error names the file and line, never the token.
	ErrTokenFile = errors.New("httpauth: bad token file")
)
