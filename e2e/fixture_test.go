package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/syncbuf"
)

// The two fixtures every e2e test stands on: a data set seeded and imported
// with the CLI, whose audit log is verified when the test ends, and a
// running `custos serve`, stopped when the test ends and before that
// verification.

// dataset seeds and imports a fresh data set with the CLI.
type dataset struct {
	seed, data string
	summary    struct {
		EdgeCases map[string]string `json:"edge_cases"`
	}
}

func newDataset(t testing.TB) *dataset {
	t.Helper()
	return newDatasetEnv(t, nil)
}

// newDatasetEnv imports with env added to the environment (e.g. Vault
// settings, which make the catalog encrypted at rest).
//
// Whatever the test does with it, the audit log the data set holds when
// the test ends must verify (audittest). The check is registered here,
// before any server can be started on the data set, so that it runs after
// every server the test started has been stopped: cleanups run last-in,
// first-out. The one test that damages a log on purpose
// (TestTamperedRecordIsNamed) makes its data set under a recorder and
// expects this check to fail.
func newDatasetEnv(t testing.TB, env []string) *dataset {
	t.Helper()
	dir := t.TempDir()
	d := &dataset{seed: filepath.Join(dir, "synthetic"), data: filepath.Join(dir, "data")}
	audittest.VerifyOnCleanup(t, d.audit())
	mustCustos(t, "seed", "--out", d.seed, "--patients", "12", "--seed", "3")
	if out, errOut, code := custos(t, env, "import", "--data-dir", d.data, d.seed); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(d.seed, "SUMMARY.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d.summary); err != nil {
		t.Fatal(err)
	}
	return d
}

// audit is the data set's audit log.
func (d *dataset) audit() string { return filepath.Join(d.data, "audit.db") }

func (d *dataset) principal(name string) string {
	return filepath.Join(d.seed, "principals", name+".json")
}

// manifest is the seed's manifest, one map per line, as `custos import`
// reads it (for writing a changed line back with reimport).
func (d *dataset) manifest(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.seed, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// reimport imports one resource again, as `custos import` of a one-line
// manifest (line, a manifest line) with content as the file it names, with
// env added to the environment, while a server may be running. It returns
// the import's output and fails the test if the import fails.
func (d *dataset) reimport(t *testing.T, env []string, line map[string]any, content []byte) string {
	t.Helper()
	updates := t.TempDir()
	file := filepath.Join(updates, filepath.FromSlash(line["file"].(string)))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(updates, "manifest.jsonl"), append(l, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := custos(t, env, "import", "--data-dir", d.data, updates)
	if code != 0 {
		t.Fatalf("import while serving: exit %d\n%s%s", code, out, errOut)
	}
	return out
}

// seedFile is the content of a file of the seed (a manifest line's "file").
func (d *dataset) seedFile(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.seed, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// missingURI is uri with its last segment replaced by an id no resource
// has: a read of it is not found.
func missingURI(uri string) string {
	return uri[:strings.LastIndex(uri, "/")+1] + "00000000-0000-4000-8000-000000000000"
}

// loopback is a listen address on a free loopback port.
const loopback = "127.0.0.1:0"

// served is a running `custos serve` on a network listener.
type served struct {
	url    string // the endpoint the server wrote to its --addr-file
	cmd    *exec.Cmd
	stderr *syncBuf      // the server's operational log
	done   chan struct{} // closed when the process has exited
	exit   error         // cmd.Wait's result, set before done is closed
}

// serve starts `custos serve --data-dir D --addr-file F` followed by args
// (the listener, --dev, and whatever the test needs), with env added to the
// environment, and waits for its endpoint. The server is stopped with
// SIGTERM when the test ends, if the test did not stop it.
func serve(t *testing.T, d *dataset, env []string, args ...string) *served {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(bin, append([]string{"serve", "--data-dir", d.data, "--addr-file", addrFile}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	s := &served{cmd: cmd, stderr: &syncBuf{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exit = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	s.url = s.waitAddr(t, addrFile)
	return s
}

// waitAddr waits up to 30 s for the server to write an address to file
// (--addr-file, --ops-addr-file) and fails the test with the server's log
// if it exits or times out first.
func (s *served) waitAddr(t *testing.T, file string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-s.done:
			t.Fatalf("serve exited (%v) before writing %s:\n%s", s.exit, filepath.Base(file), s.stderr)
		case <-deadline:
			t.Fatalf("serve did not write %s within 30 s:\n%s", filepath.Base(file), s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the server to exit, killing it and
// failing the test if it has not after 20 s. It returns the exit status
// (nil for 0); stopping a stopped server returns the same again.
func (s *served) stop(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
		return s.exit
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Errorf("serve did not stop on SIGTERM:\n%s", s.stderr)
	}
	return s.exit
}

// kill stops the server with SIGKILL, as a crash would, and waits for it.
func (s *served) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
}

// httpServer serves d in dev mode over HTTP with bearer tokens, 20
// resources a page and a debug log.
func httpServer(t *testing.T, d *dataset, tokens string) (url string, stop func(), logs *syncBuf) {
	t.Helper()
	s := serve(t, d, nil, "--dev", "--listen", loopback, "--tokens", tokens, "--page-size", "20", "--log-level", "debug")
	return s.url, func() { s.stop(t) }, s.stderr
}

// syncBuf collects a child's stderr while the test reads it: the
// project's one goroutine-safe buffer.
type syncBuf = syncbuf.Buffer
