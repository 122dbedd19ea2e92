package admin

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
)

// TestServerClosesBeforeAnswering: a server that stops (closes the
// connection) while an operation runs, before its answer, gives the
// command an error that says so, not Go's bare `Post "http://...": EOF`.
func TestServerClosesBeforeAnswering(t *testing.T) {
	dir := t.TempDir()
	id, err := dirID(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ping" {
			json.NewEncoder(w).Encode(Ping{OK: true, PID: os.Getpid(), Dir: id})
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the server stopped mid-operation
		}
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	c, err := Dial(context.Background(), Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Do(context.Background(), access.OpVerify, access.VerifyRequest{}, access.Discard)
	if err == nil || !strings.Contains(err.Error(), "closed the connection") {
		t.Fatalf("server gone mid-operation: %v; want an error saying the server closed the connection", err)
	}
}
