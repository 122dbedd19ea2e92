package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
)

// TestAuditReaderUsesAServerThatFinishedStarting: an auditor command that
// finds the socket of a server that crashed (nobody answers) waits for the
// log's lock, which the server restarting meanwhile holds while it starts.
// Once that server answers on its new socket, the command must use it.
// probe-chaos saw `audit export` fail after its 2 s wait ("admin.sock exists
// but does not answer: a server is starting or stopping") although the
// restarted server had answered on the socket for most of those 2 s.
func TestAuditReaderUsesAServerThatFinishedStarting(t *testing.T) {
	d := t.TempDir()
	// The restarting server: it holds the log's lock from the start.
	log, err := audit.Open(filepath.Join(d, "audit.db"), audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// The socket the crashed server left: a socket file nobody listens on.
	sock := admin.Path(d)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()

	// The restarted server comes up well within the command's wait for
	// the lock (audit.DefaultTimeout).
	served := make(chan *admin.Server, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		s, err := admin.Listen(sock, admin.Config{Service: access.New(log, nil, d, nil)})
		if err != nil {
			t.Error(err)
			served <- nil
			return
		}
		go s.Serve()
		served <- s
	}()
	defer func() {
		if s := <-served; s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
		}
	}()

	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	var via string
	err = withAuditReader(cmd, dataDir(d), func(r auditReader) error {
		switch r.(type) {
		case *admin.Client:
			via = "the server"
		default:
			via = "this process"
		}
		return nil
	})
	if err != nil {
		t.Fatalf("withAuditReader: %v", err)
	}
	if via != "the server" {
		t.Fatalf("the operation ran in %s, not through the server that holds the log", via)
	}
}

// TestAuditReaderLockedWithoutSocketNamesAStoppingServer: with no admin
// socket and the log's lock held, the holder may be a server that is
// stopping: it removes its socket first, then finishes the requests in
// flight (a compliance report can take seconds) before it closes the log.
// The error must name that case too; it named only another auditor
// command, a server starting and a removed socket (probe-chaos seed 2718
// iter 49: audit report while serve, SIGINTed, finished a compliance
// report).
func TestAuditReaderLockedWithoutSocketNamesAStoppingServer(t *testing.T) {
	d := t.TempDir()
	log, err := audit.Open(filepath.Join(d, "audit.db"), audit.Options{Node: "test", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	err = withAuditReader(cmd, dataDir(d), func(auditReader) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "starting or stopping") {
		t.Fatalf("withAuditReader with the lock held and no socket: %v; want it to name a server stopping", err)
	}
}

// TestAuditReaderSaysWhatAnswersAfterTheWait: when the socket is tried
// again after the wait for the log's lock and something answers that may
// not be used (here the server of another data directory, reached through
// a socket file that is a symlink to its socket), the command must say
// so, as it does when that is found first. It said "no server answers on
// …" and to retry: the second Dial's error was dropped.
func TestAuditReaderSaysWhatAnswersAfterTheWait(t *testing.T) {
	d, other := t.TempDir(), t.TempDir()
	log, err := audit.Open(filepath.Join(d, "audit.db"), audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	olog, err := audit.Open(filepath.Join(other, "audit.db"), audit.Options{Node: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer olog.Close()
	s, err := admin.Listen(admin.Path(other), admin.Config{Service: access.New(olog, nil, other, nil)})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	// No socket when the command starts; the stray one appears while it
	// waits for the lock (audit.DefaultTimeout).
	linked := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		linked <- os.Symlink(admin.Path(other), admin.Path(d))
	}()
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	err = withAuditReader(cmd, dataDir(d), func(auditReader) error {
		t.Error("the operation ran")
		return nil
	})
	if lerr := <-linked; lerr != nil {
		t.Fatal(lerr)
	}
	if !errors.Is(err, admin.ErrOtherServer) {
		t.Fatalf("withAuditReader with another directory's server on the socket after the wait: %v; want admin.ErrOtherServer", err)
	}
}
