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
	"github.com/custos-mcp/custos/server/ops"
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
	waitsForASlot(t, u.Host, 4, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", server.MCPPath, u.Host), " 401 ")
}

// The ops listener (/healthz, /readyz, /metrics) serves at most
// ops.MaxConnections connections at once: it had no cap, and a client
// trickling headers to it held a goroutine, its buffers and a descriptor
// of the process for each connection, however many it opened.
func TestOpsConnectionsBeyondTheLimitWait(t *testing.T) {
	f := newFixture(t)
	a, _ := serveApp(t, f, app.Options{Ops: app.OpsOptions{Listen: "127.0.0.1:0"}})
	u, err := url.Parse(a.OpsURL())
	if err != nil {
		t.Fatal(err)
	}
	waitsForASlot(t, u.Host, ops.MaxConnections, fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host), " 200 ")
}

// waitsForASlot holds n connections to host, each having sent half a
// request's headers, then sends req on one more: it must not be answered
// while the n are held, and must be answered with a status line containing
// want once one of them closes.
func waitsForASlot(t *testing.T, host string, n int, req, want string) {
	t.Helper()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	held := make([]net.Conn, n)
	for i := range held {
		held[i] = dial()
		fmt.Fprintf(held[i], "POST /x HTTP/1.1\r\nHost: %s\r\n", host) // and no more
	}
	next := dial()
	fmt.Fprint(next, req)
	br := bufio.NewReader(next)
	next.SetReadDeadline(time.Now().Add(time.Second))
	var ne net.Error
	if line, err := br.ReadString('\n'); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("with %d connections held, one more was answered %q (%v); want it unread", n, line, err)
	}
	held[0].Close()
	next.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, want) {
		t.Fatalf("after one held connection closed, the waiting one was answered %q (%v); want %q", line, err, want)
	}
}
