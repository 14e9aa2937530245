// Package history keeps the run history of every job: what each tick did,
// written off the per-fire write path and read back for display.
package history
