package server_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/custos-mcp/custos/server"
)

// slotsServer is the MCP listener as custos serve runs it: NewHTTPServerWith
// with o, the TCP listener under LimitConnections(o.MaxConnections), then
// TLS (a certificate for 127.0.0.1); dev tokens, or OAuth if oauth.
type slotsServer struct {
	t    *testing.T
	addr string
	tok  string // the clinician's token
}

func serveSlots(t *testing.T, o server.HTTPOptions, oauth ...bool) *slotsServer {
	t.Helper()
	f := newFixture(t, "")
	h, hs := f.httpHandler("clinician")
	tok := hs.tokens["clinician"]
	if len(oauth) > 0 && oauth[0] {
		var mint func(string, string, map[string]any) string
		h, mint = f.oauthHandlerWith(t)
		tok = mint("clinician", "resources:list resources:read", nil)
	}
	certFile, keyFile := writeTestCert(t, t.TempDir())
	cr, err := server.NewCertReloader(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.TLSConfig = cr.TLSConfig(false)
	addr := serveOnLoopbackAs(t, h, o, func(ln net.Listener) net.Listener {
		return tls.NewListener(server.LimitConnections(ln, o.MaxConnections), o.TLSConfig)
	})
	return &slotsServer{t: t, addr: addr, tok: tok}
}

// slotConn is one raw client connection (TLS) to a slotsServer.
type slotConn struct {
	s    *slotsServer
	conn *tls.Conn
	br   *bufio.Reader
}

// dial connects and completes the TLS handshake within wait; an error if
// it does not (the connection waits in the listen queue).
func (s *slotsServer) dial(wait time.Duration) (*slotConn, error) {
	d := &net.Dialer{Timeout: wait}
	raw, err := d.Dial("tcp", s.addr)
	if err != nil {
		return nil, err
	}
	s.t.Cleanup(func() { raw.Close() })
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) // the test's own certificate
	c.SetDeadline(time.Now().Add(wait))
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &slotConn{s: s, conn: c, br: bufio.NewReader(c)}, nil
}

func (s *slotsServer) mustDial() *slotConn {
	s.t.Helper()
	c, err := s.dial(5 * time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// refused sends GET /mcp without a token and reads the answer (401, or
// 429 once this source is over its failed authentications).
func (c *slotConn) refused() *http.Response {
	c.s.t.Helper()
	resp, err := c.send(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", server.MCPPath, c.s.addr), 5*time.Second)
	if err != nil {
		c.s.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests {
		c.s.t.Fatalf("a request without a token answered %d; want 401 (or 429)", resp.StatusCode)
	}
	return resp
}

// listed sends an authenticated resources/list (2026-07-28) and reads the
// answer within wait.
func (c *slotConn) listed(wait time.Duration) (*http.Response, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta2026("") + `}}`
	return c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: %s\r\nMcp-Method: resources/list\r\nContent-Length: %d\r\n\r\n%s",
		server.MCPPath, c.s.addr, c.s.tok, rev2026, len(body), body), wait)
}

func (c *slotConn) send(req string, wait time.Duration) (*http.Response, error) {
	c.conn.SetDeadline(time.Now().Add(wait))
	defer c.conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(c.conn, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// halfHeaders sends half a request's headers and no more: the connection
// is served (it holds a slot) until ReadHeaderTimeout.
func (c *slotConn) halfHeaders() {
	c.s.t.Helper()
	if _, err := fmt.Fprintf(c.conn, "POST %s HTTP/1.1\r\nHost: %s\r\n", server.MCPPath, c.s.addr); err != nil {
		c.s.t.Fatal(err)
	}
}

// closedByServer reports whether the server closed the connection: a
// read ends (EOF or reset) within wait rather than timing out.
func (c *slotConn) closedByServer(wait time.Duration) bool {
	c.conn.SetReadDeadline(time.Now().Add(wait))
	defer c.conn.SetReadDeadline(time.Time{})
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// slotLimits: 8 slots (the threshold: more than 6 in use), headers may
// trickle for 20 s and a connection may idle for a minute, so that within
// a test nothing is closed by a timeout.
var slotLimits = server.HTTPOptions{MaxConnections: 8, ReadHeaderTimeout: 20 * time.Second, IdleTimeout: time.Minute}

// With every slot of http.max_connections taken by connections that each
// carried one refused request (no token) and idle, an authenticated
// client still connects and is served. They held every slot for
// IdleTimeout (120 s by default), and the authenticated client waited in
// the listen queue as long: now a refusal's connection is closed once
// more than three quarters of the slots are in use.
func TestRefusedConnectionsCannotHoldEverySlot(t *testing.T) {
	s := serveSlots(t, slotLimits)
	var conns []*slotConn
	for i := range slotLimits.MaxConnections {
		c, err := s.dial(3 * time.Second)
		if err != nil {
			t.Fatalf("with %d connections that carried a refusal, the next could not connect: %v", i, err)
		}
		c.refused()
		conns = append(conns, c)
	}
	kept := 0
	for _, c := range conns {
		if !c.closedByServer(100 * time.Millisecond) {
			kept++
		}
	}
	if kept > 6 {
		t.Errorf("%d of %d connections kept after a refusal; want at most 6 (three quarters of the slots)", kept, slotLimits.MaxConnections)
	}
	start := time.Now()
	c, err := s.dial(3 * time.Second)
	if err != nil {
		t.Fatalf("after %d connections carried one refused request each, an authenticated client could not connect within 3 s: %v", slotLimits.MaxConnections, err)
	}
	resp, err := c.listed(3 * time.Second)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the authenticated client's list: %v %v; want 200", resp, err)
	}
	t.Logf("%d kept after a refusal; the authenticated client was served after %v", kept, time.Since(start).Round(time.Millisecond))
}

// When the last slot is taken, the connection that carried only refusals
// and has idled longest is closed, so that the next client gets a slot:
// six connections kept after a refusal (at most three quarters in use
// then) and two trickling their headers fill the eight slots; an
// authenticated client then connects and is served, and two refused
// connections are closed to make room.
func TestIdleRefusedConnectionsGoFirstAtTheCap(t *testing.T) {
	s := serveSlots(t, slotLimits)
	var refused []*slotConn
	for range 6 {
		c := s.mustDial()
		if resp := c.refused(); resp.Close {
			t.Fatalf("a refusal with %d connections open closed its connection; want it kept (at most 6 of 8 slots in use)", len(refused)+1)
		}
		refused = append(refused, c)
	}
	for range 2 {
		s.mustDial().halfHeaders()
	}
	c, err := s.dial(3 * time.Second)
	if err != nil {
		t.Fatalf("with six refused idle connections and two trickling headers in eight slots, an authenticated client could not connect within 3 s: %v", err)
	}
	if resp, err := c.listed(3 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the authenticated client's list: %v %v; want 200", resp, err)
	}
	closed := 0
	for _, c := range refused {
		if c.closedByServer(200 * time.Millisecond) {
			closed++
		}
	}
	// The eighth connection and the authenticated one each took an idle
	// refused connection's slot (the order in which they went idle is the
	// server's: not observable here).
	if closed != 2 {
		t.Errorf("%d of the 6 idle refused connections closed by the server; want 2", closed)
	}
}

// Below three quarters of the slots a refused request keeps its
// connection (an unauthenticated flood on kept-alive connections costs
// no handshakes: TestRefusedRequestWithItsBodyKeepsItsConnection); above
// it the connection is closed after the answer, with dev tokens and
// OAuth alike; an authenticated request keeps its connection.
func TestRefusalClosesItsConnectionNearTheCap(t *testing.T) {
	for _, tc := range []struct {
		held      int // connections trickling their headers, besides the refused one
		oauth     bool
		wantClose bool
	}{
		{0, false, false},
		{5, false, false}, // 6 of 8 in use
		{6, false, true},  // 7 of 8
		{7, false, true},  // 8 of 8
		{5, true, false},
		{6, true, true},
	} {
		t.Run(fmt.Sprintf("%d held, oauth %v", tc.held, tc.oauth), func(t *testing.T) {
			s := serveSlots(t, slotLimits, tc.oauth)
			for range tc.held {
				s.mustDial().halfHeaders()
			}
			c := s.mustDial()
			resp := c.refused()
			if resp.Close != tc.wantClose {
				t.Errorf("with %d of %d slots in use, a refusal said Connection: close %v; want %v", tc.held+1, slotLimits.MaxConnections, resp.Close, tc.wantClose)
			}
			if got := c.closedByServer(time.Second); got != tc.wantClose {
				t.Errorf("with %d of %d slots in use, the refused connection was closed %v; want %v", tc.held+1, slotLimits.MaxConnections, got, tc.wantClose)
			}
			if !tc.wantClose {
				return
			}
			authed := s.mustDial()
			if resp, err := authed.listed(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
				t.Errorf("with %d of %d slots in use, an authenticated list: %v %v; want 200 on a connection kept", tc.held+1, slotLimits.MaxConnections, resp, err)
			}
		})
	}
}

// A slot held by an authenticated client's idle connection is not taken
// from it: with it and seven connections trickling headers in eight
// slots, a new client waits, and the idle connection still serves its
// client's next request. Only connections that never carried an
// authenticated request are closed to make room (SECURITY.md).
func TestAuthenticatedIdleConnectionKeepsItsSlot(t *testing.T) {
	s := serveSlots(t, slotLimits)
	authed := s.mustDial()
	if resp, err := authed.listed(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("the authenticated client's first list: %v %v; want 200 on a connection kept", resp, err)
	}
	for range 7 {
		s.mustDial().halfHeaders()
	}
	if _, err := s.dial(time.Second); err == nil {
		t.Fatal("with every slot held (one by an authenticated idle connection), a new client connected; want it to wait")
	}
	if resp, err := authed.listed(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("the authenticated client's second list on its idle connection: %v %v; want 200 on the connection kept", resp, err)
	}
}

// The MCP listener speaks HTTP/1.1 only, even to a client offering h2
// (its TLS configuration names no ALPN protocol): connSlots counts one
// request at a time on a connection, which HTTP/2's streams would break.
func TestSlotsListenerSpeaksHTTP1Only(t *testing.T) {
	s := serveSlots(t, slotLimits)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}}} // the test's own certificate
	resp, err := c.Get("https://" + s.addr + server.MCPPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Errorf("a client offering h2 was answered over %s; want HTTP/1.1 (connSlots assumes one request at a time)", resp.Proto)
	}
}
