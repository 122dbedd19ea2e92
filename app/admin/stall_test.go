package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
	"github.com/custos-mcp/custos/internal/syncbuf"
)

// appendMany appends n records from 64 goroutines (group commits).
func appendMany(l *audit.Log, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 64 {
				_, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesRead, Outcome: audit.OutcomeAllow,
					Reason: "stall-test", URIs: []string{fmt.Sprintf("custos://fhir/Observation/o-%08d-padding-padding-padding-padding", i)}})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// serveStalling serves l on dir's socket with the stall limit given, and
// returns the server's operational log.
func serveStalling(t *testing.T, l *audit.Log, dir string, stall time.Duration) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	s, err := Listen(Path(dir), Config{Service: access.New(l, nil, dir, nil), WriteStall: stall,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return logs
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer = syncbuf.Buffer

// TestStalledReaderDoesNotHoldTheLog: an auditor whose command stopped
// reading its output (suspended, or a local peer that sends a backup
// request and never reads) must not keep the backup's read transaction on
// the audit log open: bbolt reuses no page freed while it is, so the live
// file grows with every append for as long as the peer waits (and where
// the live segment's mapping could not be reserved, audit/mapsize.go, a
// remap would make every append, every MCP request, wait for that peer).
// The server gives up on a reader that accepts nothing for
// Config.WriteStall, which ends the transaction (the warning and the
// missing result below); the appends go on.
func TestStalledReaderDoesNotHoldTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 40,000 records")
	}
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	dir := filepath.Dir(path)
	const n = 20000 // a log of several MiB: more than the socket buffers hold
	if err := appendMany(l, n); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := serveStalling(t, l, dir, 300*time.Millisecond)

	conn, err := net.Dial("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // before Shutdown: it would wait for the stalled request
	body := `{"purpose":"HOPERAT","out":"/backups/stalled"}`
	fmt.Fprintf(conn, "POST /v1/backup HTTP/1.1\r\nHost: custos-admin\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("backup request: %q, %v", status, err)
	}
	// The peer reads nothing more. The log must now grow past its mapping
	// (the same number of records again doubles it).
	done := make(chan error, 1)
	go func() { done <- appendMany(l, n) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		head, _ := l.Head()
		t.Fatalf("appends stopped at head %d (log of %d bytes before): the stalled backup reader holds the audit log's read transaction", head, st.Size())
	}
	// The output the peer finally reads is incomplete, and says so by
	// ending without a result.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(br)
	if strings.Contains(string(rest), "\r\n"+TrailerResult+":") {
		t.Fatal("the abandoned backup ended with a Custos-Result")
	}
	// The operator learns why the caller's operation failed.
	for i := 0; !strings.Contains(logs.String(), "stopped reading for longer than the stall limit"); i++ {
		if i == 100 {
			t.Fatalf("no warning about the cut-off caller in the log:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSilentRequestBody: a peer that announces a request body and sends
// nothing (or trickles it) is answered 400 after Config.WriteStall, not
// waited for forever (its connection would also hold up Shutdown).
func TestSilentRequestBody(t *testing.T) {
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	dir := filepath.Dir(path)
	serveStalling(t, l, dir, 300*time.Millisecond)
	conn, err := net.Dial("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/verify HTTP/1.1\r\nHost: custos-admin\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 400 ") {
		t.Fatalf("a request whose body never comes: %q, %v; want 400 after the stall limit", status, err)
	}
	if head, _ := l.Head(); head != 0 {
		t.Fatalf("head %d: the incomplete request was recorded", head)
	}
}

// TestSlowReaderIsNotCutOff: the stall limit bounds each write, not the
// operation: a caller that keeps reading, slowly, gets the whole output
// however long it takes (and the request's read deadline, lifted after
// its body, does not cancel the operation meanwhile).
func TestSlowReaderIsNotCutOff(t *testing.T) {
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	dir := filepath.Dir(path)
	if err := appendMany(l, 8000); err != nil {
		t.Fatal(err)
	}
	serveStalling(t, l, dir, time.Second)
	c, err := Dial(context.Background(), Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	lines := 0
	res, err := c.Do(context.Background(), access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}, func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 4096)
		for {
			_, err := br.ReadBytes('\n')
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if lines++; lines%500 == 0 {
				time.Sleep(100 * time.Millisecond) // slow, but never near the 1 s limit without reading
			}
		}
	})
	if err != nil || res.Records != 8001 || lines != 8001 {
		t.Fatalf("slow export: %+v, %d lines, %v", res, lines, err)
	}
	if took := time.Since(start); took < 1200*time.Millisecond {
		t.Fatalf("the export took %v: not slower than the stall limit, the test proves nothing", took)
	}
}
