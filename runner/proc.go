package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shardcron/shardcron/internal/procstat"
)

// asFile returns w as a file a child can write to directly: w itself when it
// is one, else the write end of a pipe copied into w. done closes the write
// end and waits for the copy; call it once every writer is dead.
func asFile(w io.Writer) (f *os.File, done func(), err error) {
	if f, ok := w.(*os.File); ok {
		return f, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	copied := make(chan struct{}) // closed when the copy ends
	go func() {
		defer close(copied)
		_, _ = io.Copy(w, pr)
		_ = pr.Close()
	}()
	return pw, func() { _ = pw.Close(); <-copied }, nil
}

// lookPath resolves a command name against path (the server's PATH) the
// way execvp does. Names with a slash are used as they are (relative to
// dir, where the job starts).
func lookPath(file, path, dir string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		check := p
		if !filepath.IsAbs(p) && dir != "" {
			check = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(check); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(p) && !strings.HasPrefix(p, ".") {
				p = "./" + p
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: executable file not found in the server's PATH %q", file, path)
}

// childrenOf lists the pids whose parent is ppid, from /proc.
func childrenOf(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := parentOf(pid); err == nil && p == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf reads a process's parent pid from /proc/<pid>/stat.
func parentOf(pid int) (int, error) {
	f, err := procstat.Read(pid, 0)
	if err != nil {
		return 0, err
	}
	if len(f) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(f[1])
}
