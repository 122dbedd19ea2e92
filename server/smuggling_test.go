package server_test

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A request with both Content-Length and Transfer-Encoding: chunked is
// answered and its connection closed (RFC 9112 §6.1: the server "MUST
// close the connection after responding to such a request"), so a request
// pipelined behind it, as a proxy desynchronized by the two headers would
// send it, is never read. net/http drops the Content-Length and kept the
// connection: both requests were answered on one connection, on the
// dev-token and the OAuth handler alike.
func TestChunkedRequestClosesTheConnection(t *testing.T) {
	for _, e := range newFixture(t, "").endpoints(t) {
		name := e.name
		u, err := url.Parse(e.url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		first := "POST " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n" +
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
		second := "POST " + u.Path + "?pipelined=1 HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Length: 0\r\n\r\n"
		if _, err := io.WriteString(conn, first+second); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		var out bytes.Buffer
		_, err = io.Copy(&out, conn)
		conn.Close()
		if n := strings.Count(out.String(), "HTTP/1.1 "); n != 1 {
			t.Errorf("%s: %d responses on the connection, want 1 and the connection closed", name, n)
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the connection stayed open after the answer", name)
		}
	}
}
