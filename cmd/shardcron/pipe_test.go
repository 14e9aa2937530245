package main

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// TestClosedStdoutExitsQuietly: a command whose reader stopped reading
// (shardcron status | head) exits 0 and says nothing, rather than dying of
// SIGPIPE, which docker compose and shells report as an error.
func TestClosedStdoutExitsQuietly(t *testing.T) {
	besideOthers(t)
	for _, args := range [][]string{{"version"}, {"validate", "-f", "../../examples/jobs.yaml", "-o", "json"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close() // the reader is gone before the first write
		cmd := exec.Command(binPath, args...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = w, &stderr
		err = cmd.Run()
		w.Close()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("%v with stdout closed: %v (%v), stderr %q; want exit 0, silent", args, err, cmd.ProcessState, stderr.String())
		}
	}
}
