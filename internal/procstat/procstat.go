// Package procstat reads the stat line Linux keeps for each process and
// thread (/proc/<pid>/stat, /proc/<pid>/task/<tid>/stat; proc(5)).
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Fields returns the fields of a stat line that follow the command name,
// so Fields(stat)[0] is proc(5)'s field 3 (the state), [1] the parent
// pid, [11] and [12] utime and stime. The command name may hold spaces
// and parentheses, so the fields are counted from the last ')'.
func Fields(stat []byte) ([]string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, errors.New("procstat: no command name in stat line")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) == 0 {
		return nil, errors.New("procstat: nothing after the command name")
	}
	return f, nil
}

// Read returns the Fields of the stat line of a process (tid 0) or of one
// of its threads.
func Read(pid, tid int) ([]string, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	if tid != 0 {
		path = fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Fields(b)
}

// Threads lists the thread ids of a process (/proc/<pid>/task).
func Threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
