package docs

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImagesBuildForLinux: `make image` (and the other image targets) build
// their binaries for Linux whatever the host says, so Docker Desktop on
// macOS gets a binary its Linux VM can run; the architecture is the host's
// unless GOARCH says otherwise. Checked on the commands make would run
// (make -n), so no image is built.
func TestImagesBuildForLinux(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		// make test itself needs make; go test alone may run without it.
		if os.Getenv("CI") != "" {
			t.Fatal("make is not installed, and CI is set")
		}
		t.Skip("make is not installed: the image targets are not checked")
	}
	for _, tc := range []struct{ goos, goarch, want string }{
		{"darwin", "", "GOARCH="},
		{"windows", "", "GOARCH="},
		{"darwin", "arm64", "GOARCH=arm64"},
	} {
		cmd := exec.Command("make", "-n", "-C", "..", "static", "image", "etcd-image", "e2e-images")
		env := []string{"GOOS=" + tc.goos, "MAKEFLAGS=", "MAKELEVEL="}
		if tc.goarch != "" {
			env = append(env, "GOARCH="+tc.goarch)
		}
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n: %v\n%s", err, out)
		}
		builds := 0
		for line := range strings.SplitSeq(string(out), "\n") {
			if !strings.Contains(line, " build -trimpath") {
				continue
			}
			builds++
			if !strings.Contains(line, "GOOS=linux ") || !strings.Contains(line, tc.want) || !strings.Contains(line, "CGO_ENABLED=0") {
				t.Errorf("GOOS=%s GOARCH=%s: an image binary is not built static for linux (%s):\n%s", tc.goos, tc.goarch, tc.want, line)
			}
		}
		if builds < 4 { // shardcron (static, which image needs), etcd, the ledger, the old shardcron
			t.Errorf("GOOS=%s: %d image builds in make -n's output, want at least 4:\n%s", tc.goos, builds, out)
		}
	}
}
