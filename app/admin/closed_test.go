package admin

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit/access"
)

// TestServerClosesBeforeAnswering: a server that stops (closes the
// connection) while an operation runs, before its answer, gives the
// command an error that says so, not Go's bare `Post "http://...": EOF`.
func TestServerClosesBeforeAnswering(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "audit.db"), nil, 0o600); err != nil { // owned by this test's uid
		t.Fatal(err)
	}
	hs := fakeServer(t, dir, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the server stopped mid-operation
		}
	})
	go hs.Serve(hs.ln)
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

// fake is a stand-in server on a data directory's socket.
type fake struct {
	*http.Server
	ln net.Listener
}

// fakeServer listens on dir's socket (mode 0777) and answers the ping as
// the server of dir; other requests go to op.
func fakeServer(t testing.TB, dir string, op http.HandlerFunc) fake {
	id, err := dirID(dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(Path(dir), 0o777)
	return fake{&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ping" {
			json.NewEncoder(w).Encode(Ping{OK: true, PID: os.Getpid(), Dir: id})
			return
		}
		op(w, r)
	})}, ln}
}
