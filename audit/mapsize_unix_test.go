//go:build linux

package audit

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custos-mcp/custos/internal/fsspace"
)

// TestLiveSegmentOpensWithLimitedAddressSpace: where RLIMIT_AS (systemd's
// LimitAS=) leaves no room for the live segment's mapping, the log still
// opens and appends, with bbolt's default mapping and a warning, instead
// of failing to start. Run in a child process: the limit is the process's.
func TestLiveSegmentOpensWithLimitedAddressSpace(t *testing.T) {
	if dir := os.Getenv("CUSTOS_TEST_LIMITED_AS_DIR"); dir != "" {
		limitedASChild(t, dir)
		return
	}
	dir := t.TempDir()
	if fs, err := fsspace.Size(dir); err != nil || liveMapSize(fs) == 0 {
		t.Fatalf("the temporary directory's file system size: %d, %v", fs, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLiveSegmentOpensWithLimitedAddressSpace$", "-test.v")
	cmd.Env = append(os.Environ(), "CUSTOS_TEST_LIMITED_AS_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mustVerify(t, filepath.Join(dir, "audit.db"))
}

func limitedASChild(t *testing.T, dir string) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var vmKB int64
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
			vmKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if vmKB == 0 {
		t.Fatalf("no VmSize in /proc/self/status")
	}
	// Room for the runtime to go on, none for a GiB mapping.
	limit := uint64(vmKB<<10) + 256<<20
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	l, err := Open(filepath.Join(dir, "audit.db"), Options{Node: "n", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open with a limited address space: %v", err)
	}
	if _, err := l.Append(context.Background(), sampleEntry(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "mapping could not be reserved") {
		t.Fatalf("no warning about the mapping; log:\n%s", logged.String())
	}
}
