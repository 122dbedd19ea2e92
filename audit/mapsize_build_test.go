package audit

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestAuditBuildsOnOtherUnixSystems: the audit package compiles for the
// unix systems whose Statfs_t has no Blocks and Bsize (OpenBSD) or which
// have no Statfs at all (NetBSD, illumos). 4d4e80e's fsSize was built for
// every unix and broke the package, and custos, on them.
func TestAuditBuildsOnOtherUnixSystems(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, goos := range []string{"openbsd", "netbsd", "illumos", "darwin", "freebsd", "windows"} {
		cmd := exec.Command(gobin, "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go build ./audit: %v\n%s", goos, err, out)
		}
	}
	// The tests compile on 32-bit platforms too: TestLiveMapSize's 32-bit
	// branch can only run if its file compiles there (its cases overflowed
	// an int).
	for _, goarch := range []string{"386", "arm"} {
		cmd := exec.Command(gobin, "test", "-c", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go test -c ./audit: %v\n%s", goarch, err, out)
		}
	}
}
