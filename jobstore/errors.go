package jobstore

import "errors"

// Errors of the job store, wrapped with the version or job they concern.
var (
	// ErrConflict: another apply flipped the pointer since this one read it.
	// Nothing of this apply became visible; re-read and apply again.
	ErrConflict = errors.New("jobstore: job set changed concurrently")
	// ErrFormat: the stored job set is in a newer format than this binary
	// knows. Upgrade shardcron before reading or applying.
	ErrFormat = errors.New("jobstore: job set format is newer than this binary supports")
	// ErrCorrupt: the stored chunks do not match their pointer (missing
	// chunk, wrong count or digest, undecodable data).
	ErrCorrupt = errors.New("jobstore: stored job set is corrupt")
	// ErrTooLarge: one job's encoding exceeds the chunk size.
	ErrTooLarge = errors.New("jobstore: job too large to store")
	// ErrInvalid: the job set handed to Apply is not a valid set (an empty
	// or duplicate name). The config package validates files first; this is
	// the store's own last line of defence.
	ErrInvalid = errors.New("jobstore: invalid job set")
	// ErrInvalidConfig: ApplyOptions out of range.
	ErrInvalidConfig = errors.New("jobstore: invalid options")
)
