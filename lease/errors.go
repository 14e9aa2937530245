package lease

import "errors"

// Errors of the package, checked with errors.Is. Returned errors wrap them
// with the shard or key concerned.
var (
	// ErrLost: the session's safe deadline passed (renewals did not land in
	// time, or etcd reported the lease gone). A lost session is never
	// revived; the caller starts a new one.
	ErrLost = errors.New("lease: session lost")
	// ErrClosed: the session was closed or resigned.
	ErrClosed = errors.New("lease: session closed")
	// ErrHeld: Acquire found the shard held by a lease (another node's, or
	// an earlier acquisition by this one).
	ErrHeld = errors.New("lease: shard held")
	// ErrNotHeld: a release's guard failed: the shard key no longer carries
	// the token's generation (it expired, or another owner holds it).
	ErrNotHeld = errors.New("lease: shard not held under this token")
	// ErrExists: Create found the key already present.
	ErrExists = errors.New("lease: key exists")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("lease: invalid config")
	// ErrInvalid: a bad argument (a shard out of range, released twice in
	// one call) or a bad stored value (a release marker).
	ErrInvalid = errors.New("lease: invalid")
)
