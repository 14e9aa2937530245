package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// notDumpable makes this process undumpable. Exec jobs run as the
// replica's user, and a process of the same user may otherwise read
// /proc/PID/environ (every job secret, an etcd password given in the
// environment), /proc/PID/mem and attach with ptrace. Undumpable, those
// files belong to root and ptrace is refused; the supervisors and jobs
// this process starts are dumpable again (execve resets the flag), and
// hold only their own environment. Root, or a user with CAP_SYS_PTRACE,
// still reads them.
func notDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
