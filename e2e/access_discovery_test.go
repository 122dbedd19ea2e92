package e2e

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/audittest"
)

// headOf verifies d's audit log with the CLI (which appends one access
// record) and returns the head it reports.
func headOf(t *testing.T, dir string) uint64 {
	t.Helper()
	var res struct {
		Summary struct {
			HeadSeq uint64 `json:"head_seq"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(mustCustos(t, "audit", "verify", "--data-dir", dir, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	return res.Summary.HeadSeq
}

// TestAccessDiscoveryFindsOnlyItsOwnServer: an auditor command given
// --data-dir B talks only to B's server. B/admin.sock made a symlink to
// A's running server's socket is refused with a clear error and nothing
// is read from or recorded in A's log (before, `audit verify --data-dir
// B` verified A's log and printed OK for it). And a data directory deeper
// than a Unix socket address (108 bytes) is served and found through its
// socket, which is removed when the server stops (before, serve refused
// to start: "bind: invalid argument").
func TestAccessDiscoveryFindsOnlyItsOwnServer(t *testing.T) {
	a := newDataset(t)
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60), "data")
	if err := os.MkdirAll(filepath.Dir(deep), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a.data, deep); err != nil {
		t.Fatal(err)
	}
	a.data = deep
	audittest.VerifyOnCleanup(t, a.audit()) // at the new place, after the server stopped
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	newToken(t, a.principal("clinician"), tokens)
	s := serve(t, a, nil, "--dev", "--listen", loopback, "--tokens", tokens)
	sock := filepath.Join(a.data, "admin.sock")
	if len(sock) <= 108 {
		t.Fatalf("socket path of %d bytes: not deep enough", len(sock))
	}
	out := mustCustos(t, "audit", "export", "--data-dir", a.data, "--purpose", "HOPERAT")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"action":"audit/export"`) || !strings.Contains(last, `"source":"admin.sock"`) {
		t.Fatalf("the export of the deep data directory did not go through the server's socket: %s", last)
	}

	b := t.TempDir()
	if err := os.Symlink(sock, filepath.Join(b, "admin.sock")); err != nil {
		t.Fatal(err)
	}
	before := headOf(t, a.data)
	for _, args := range [][]string{
		{"audit", "verify", "--data-dir", b},
		{"audit", "export", "--data-dir", b, "--purpose", "HOPERAT"},
		{"backup", "--data-dir", b, "--purpose", "HOPERAT", "--out", filepath.Join(t.TempDir(), "bk")},
	} {
		out, errOut, code := custos(t, nil, args...)
		if code == 0 || !strings.Contains(errOut, "another data directory") {
			t.Errorf("custos %v through a symlink to another server's socket: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if after := headOf(t, a.data); after != before+1 {
		t.Fatalf("A's head went from %d to %d: the commands given B read or recorded in A's log", before, after)
	}

	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deep socket is still there after the server stopped: %v", err)
	}
}
