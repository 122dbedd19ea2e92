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
// have no Statfs at all (NetBSD, illumos). 4d4e80e's fsSize (now
// internal/fsspace, built with the package) was built for
// every unix and broke the package, and custos, on them. One system of
// each kind (illumos builds as NetBSD does; darwin stands for the systems
// that read the size; windows for non-unix), and one 32-bit platform for
// the tests: each cross build costs ~30 s on a cold build cache.
func TestAuditBuildsOnOtherUnixSystems(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, goos := range []string{"openbsd", "netbsd", "darwin", "windows"} {
		cmd := exec.Command(gobin, "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go build ./audit: %v\n%s", goos, err, out)
		}
	}
	// The tests compile on 32-bit platforms too: TestLiveMapSize's 32-bit
	// branch can only run if its file compiles there (its cases overflowed
	// an int).
	for _, goarch := range []string{"386"} {
		cmd := exec.Command(gobin, "test", "-c", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go test -c ./audit: %v\n%s", goarch, err, out)
		}
	}
}
