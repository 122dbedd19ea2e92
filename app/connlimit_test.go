package app_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/server"
)

// The MCP listener serves at most http.max_connections connections at
// once: with 4, four raw clients that send half their headers and wait
// hold all four, and a fifth client's request is not read (it waits in the
// kernel's listen queue) until one of them closes; then it is answered.
// net/http has no bound of its own: every connection was accepted and
// read, each a goroutine and its buffers, however many a client opened.
func TestConnectionsBeyondTheLimitWait(t *testing.T) {
	f := newFixture(t)
	a, _ := serveApp(t, f, app.Options{HTTP: &app.HTTPOptions{
		Server: server.HTTPOptions{MaxConnections: 4, ReadHeaderTimeout: 20 * time.Second, ReadTimeout: 20 * time.Second}}})
	u, err := url.Parse(a.URL())
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	held := make([]net.Conn, 4)
	for i := range held {
		held[i] = dial()
		fmt.Fprintf(held[i], "POST %s HTTP/1.1\r\nHost: %s\r\n", server.MCPPath, u.Host) // and no more
	}
	fifth := dial()
	fmt.Fprintf(fifth, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", server.MCPPath, u.Host)
	br := bufio.NewReader(fifth)
	fifth.SetReadDeadline(time.Now().Add(time.Second))
	var ne net.Error
	if line, err := br.ReadString('\n'); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("with 4 connections held, a fifth was answered %q (%v); want it unread", line, err)
	}
	held[0].Close()
	fifth.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 401 ") {
		t.Fatalf("after one held connection closed, the fifth was answered %q (%v); want 401 (it has no token)", line, err)
	}
}
