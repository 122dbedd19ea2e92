package vaulttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
)

// EnvBinary names the environment variable that holds the path of the Vault
// binary built by tools/vault/build.sh.
const EnvBinary = "CUSTOS_VAULT_BIN"

// missingHint is the message of a skip or failure when no binary is found.
const missingHint = "Vault binary not found: run tools/vault/build.sh (make test does) and set " + EnvBinary

// DefaultStartTimeout bounds how long [Start] waits for the dev server.
const DefaultStartTimeout = 30 * time.Second

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 5 * time.Second

// Binary returns the Vault binary named by $CUSTOS_VAULT_BIN. When the
// variable is unset or does not name an executable file, Binary fails the
// test if the environment has CI=true and skips it otherwise.
func Binary(tb testing.TB) string {
	tb.Helper()
	path, err := locateBinary(os.Getenv)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s (CI=true: a missing dependency fails): %v", missingHint, err)
	}
	tb.Skipf("%s: %v", missingHint, err)
	return ""
}

// locateBinary checks the binary named by getenv(EnvBinary).
func locateBinary(getenv func(string) string) (string, error) {
	path := getenv(EnvBinary)
	if path == "" {
		return "", fmt.Errorf("%s is not set", EnvBinary)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", EnvBinary, path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s=%q is not an executable file", EnvBinary, path)
	}
	return path, nil
}

// Options configures [Start]. The zero value is ready to use.
type Options struct {
	// Binary is the Vault binary; empty means [Binary](tb).
	Binary string
	// StartTimeout bounds the wait for readiness; zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// Server is a running Vault dev server child process.
type Server struct {
	// Addr is the API address, "http://127.0.0.1:PORT".
	Addr string
	// RootToken is the dev server's root token (random per server).
	RootToken string
	// LogPath is the file holding the server's stdout and stderr.
	LogPath string

	cmd    *exec.Cmd
	home   string
	exited chan struct{} // closed once the process has been reaped

	stopOnce sync.Once
	stopErr  error
}

// Start starts a Vault dev server for the test, waits until it is ready and
// registers a cleanup that stops it. It fails the test if the server cannot
// start and skips (or fails under CI=true) when no binary is available. When
// the test has failed, the cleanup logs the tail of the server log.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = Binary(tb)
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := StartProcess(ctx, bin, filepath.Join(tb.TempDir(), "vault.log"))
	if err != nil {
		tb.Fatalf("vaulttest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("vaulttest: stopping vault: %v", err)
		}
		if tb.Failed() {
			tb.Logf("vaulttest: tail of %s:\n%s", s.LogPath, s.LogTail())
		}
	})
	return s
}

// StartProcess starts `vault server -dev` from binary on a free loopback
// port with a random root token, appending its stdout and stderr to logPath,
// and waits until it is ready or ctx ends. ctx bounds only the start: the
// process runs until [Server.Stop], which the caller must call. It retries
// with a new port if the chosen one was taken meanwhile.
func StartProcess(ctx context.Context, binary, logPath string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := startOnce(ctx, binary, logPath)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if s == nil || ctx.Err() != nil || !strings.Contains(readTail(logPath, 64<<10), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, binary, logPath string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("choosing a port: %w", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("drawing root token: %w", err)
	}
	home, err := os.MkdirTemp("", "vaulttest-home-")
	if err != nil {
		return nil, fmt.Errorf("creating HOME: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("opening log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor

	listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{
		Addr:      "http://" + listen,
		RootToken: hex.EncodeToString(tok),
		LogPath:   logPath,
		home:      home,
		exited:    make(chan struct{}),
	}
	cmd := exec.Command(binary, "server", "-dev",
		"-dev-listen-address="+listen,
		"-dev-no-store-token",
	)
	// The root token goes in the environment, which only the owner reads
	// (/proc/PID/environ); a flag is in every local user's ps.
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + home, "VAULT_DEV_ROOT_TOKEN_ID=" + s.RootToken}
	cmd.Dir = home
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return s, fmt.Errorf("%w at %s: %v; log tail:\n%s", ErrNotReady, s.Addr, err, s.LogTail())
	}
	return s, nil
}

// freePort asks the kernel for an unused loopback port P such that P+1 is
// free too: a dev server also binds its cluster listener on P+1. The ports
// are free when freePort returns; StartProcess retries if one is taken
// before Vault binds it.
func freePort() (int, error) {
	var lastErr error
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)))
		l.Close()
		if err == nil {
			l2.Close()
			return port, nil
		}
		lastErr = err
	}
	return 0, lastErr
}

// waitReady polls until Vault reports initialized and unsealed, the root
// token works and the dev KV v2 mount "secret/" exists.
func (s *Server) waitReady(ctx context.Context) error {
	c, err := s.Client(s.RootToken)
	if err != nil {
		return err
	}
	c.SetMaxRetries(0)
	c.SetClientTimeout(2 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = s.readyOnce(ctx, c)
		if last == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("vault exited (%v)", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func (s *Server) readyOnce(ctx context.Context, c *api.Client) error {
	h, err := c.Sys().HealthWithContext(ctx)
	if err != nil {
		return err
	}
	if !h.Initialized || h.Sealed {
		return fmt.Errorf("health: initialized=%v sealed=%v", h.Initialized, h.Sealed)
	}
	if _, err := c.Auth().Token().LookupSelfWithContext(ctx); err != nil {
		return fmt.Errorf("root token: %w", err)
	}
	m, err := c.Sys().GetMountWithContext(ctx, "secret")
	if err != nil {
		return fmt.Errorf("kv mount: %w", err)
	}
	if m.Type != "kv" || m.Options["version"] != "2" {
		return fmt.Errorf("kv mount: type %q version %q", m.Type, m.Options["version"])
	}
	return nil
}

// Client returns a new API client for the server that authenticates with
// token ("" for none). It ignores VAULT_TOKEN, VAULT_ADDR, VAULT_AGENT_ADDR,
// VAULT_NAMESPACE and proxy settings from the environment. It makes at most
// 2 retries and times requests out after 30 s; tests may change both.
func (s *Server) Client(token string) (*api.Client, error) {
	cfg := api.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("vault client config: %w", cfg.Error)
	}
	cfg.Address = s.Addr
	cfg.AgentAddress = ""
	cfg.MaxRetries = 2
	cfg.Timeout = 30 * time.Second
	cfg.Limiter = nil
	cfg.SRVLookup = false
	if tr, ok := cfg.HttpClient.Transport.(*http.Transport); ok {
		tr.Proxy = nil // loopback only; ignore VAULT_HTTP_PROXY and HTTP_PROXY
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	c.ClearNamespace()
	c.SetToken(token)
	return c, nil
}

// Root returns a new client holding the root token. It panics only if the
// client cannot be built, which Client already ruled out while the server
// started (the environment would have to change in between).
func (s *Server) Root() *api.Client {
	c, err := s.Client(s.RootToken)
	if err != nil {
		panic(err)
	}
	return c
}

// signal sends sig to the server's process group.
func (s *Server) signal(sig syscall.Signal) error {
	select {
	case <-s.exited:
		return ErrNotRunning
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return ErrNotRunning
		}
		return fmt.Errorf("vaulttest: signal %v: %w", sig, err)
	}
	return nil
}

// Pause freezes the server with SIGSTOP: connections are still accepted by
// the kernel but no request is answered, so clients time out. Resume or Stop
// ends the pause.
// It returns once every thread of the server is stopped.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(s.cmd.Process.Pid, time.Now().Add(5*time.Second))
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Stop stops the server: it resumes it if paused, sends SIGTERM, and sends
// SIGKILL if the process has not exited after a few seconds; then it removes
// the server's HOME. It is safe to call more than once and after the process
// exited by itself; later calls return the first call's result. It returns an
// error only if the process had to be killed.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		defer os.RemoveAll(s.home)
		if errors.Is(s.signal(syscall.SIGCONT), ErrNotRunning) {
			<-s.exited
			return
		}
		_ = s.signal(syscall.SIGTERM)
		select {
		case <-s.exited:
			return
		case <-time.After(stopGrace):
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		s.stopErr = fmt.Errorf("vaulttest: vault did not exit within %v of SIGTERM; killed", stopGrace)
	})
	return s.stopErr
}

// Exited reports whether the server process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// LogTail returns the last 16 KiB of the server log with the root token and
// the unseal key redacted.
func (s *Server) LogTail() string {
	return redact(readTail(s.LogPath, 16<<10), s.RootToken)
}

// readTail returns up to n bytes from the end of the file at path, or a note
// saying why it could not be read.
func readTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unavailable: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

var unsealKeyLine = regexp.MustCompile(`(?m)(Unseal Key[^:]*:\s*)\S+`)

// redact removes the root token and the dev unseal key from log text.
func redact(log, rootToken string) string {
	if rootToken != "" {
		log = strings.ReplaceAll(log, rootToken, "[root token redacted]")
	}
	return unsealKeyLine.ReplaceAllString(log, "${1}[redacted]")
}
