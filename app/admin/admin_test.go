package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/audittest"
)

// TestAllowed is the peer-credential decision: the server's uid, root, or
// a configured admin group; nobody else.
func TestAllowed(t *testing.T) {
	const self = 1000
	for _, c := range []struct {
		name   string
		cred   Cred
		groups []uint32
		want   bool
	}{
		{"same uid", Cred{UID: 1000, GID: 1000}, nil, true},
		{"root", Cred{UID: 0, GID: 0}, nil, true},
		{"other uid", Cred{UID: 1001, GID: 1001}, nil, false},
		{"other uid, server's gid", Cred{UID: 1001, GID: 1000}, nil, false},
		{"admin group", Cred{UID: 1001, GID: 50}, []uint32{50}, true},
		{"another group", Cred{UID: 1001, GID: 51}, []uint32{50}, false},
		{"nobody", Cred{UID: 65534, GID: 65534}, []uint32{50, 60}, false},
	} {
		if got := Allowed(c.cred, self, c.groups); got != c.want {
			t.Errorf("%s: Allowed(%+v, %d, %v) = %v, want %v", c.name, c.cred, self, c.groups, got, c.want)
		}
	}
}

// serveLog serves a fresh test log on a socket in its data directory.
func serveLog(t *testing.T, groups []uint32) (*Server, *audit.Log, string) {
	t.Helper()
	l, path := audittest.Open(t, audit.Options{Node: "n1"})
	dir := filepath.Dir(path)
	for range 3 {
		if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Listen(Path(dir), Config{Service: access.New(l, nil, dir, nil), Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, l, dir
}

// TestSocketChecksTheRealPeer: over the real socket, the peer's uid from
// SO_PEERCRED (this test's) names the caller in the access record; the
// socket is 0600; output and trailer arrive; errors are JSON with a code.
func TestSocketChecksTheRealPeer(t *testing.T) {
	s, l, dir := serveLog(t, nil)
	st, err := os.Stat(Path(dir))
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v (%v), want a 0600 socket", st.Mode(), err)
	}
	conn, err := net.Dial("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	cred, err := PeerCred(conn.(*net.UnixConn))
	conn.Close()
	if err != nil || cred.UID != uint32(os.Getuid()) || cred.PID != int32(os.Getpid()) {
		t.Fatalf("PeerCred = %+v, %v; want this process (uid %d, pid %d)", cred, err, os.Getuid(), os.Getpid())
	}

	c, err := Dial(context.Background(), Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	res, err := c.Do(context.Background(), access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}, func(r io.Reader) error {
		_, err := io.Copy(&out, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.AccessSeq != 4 || res.Records != 4 || strings.Count(out.String(), "\n") != 4 {
		t.Fatalf("result %+v, %d lines", res, strings.Count(out.String(), "\n"))
	}
	want := `"sub":"os:uid=` + strconv.Itoa(os.Getuid())
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), `"source":"admin.sock"`) {
		t.Fatalf("the access record does not name the peer %s from the socket:\n%s", want, out.String())
	}

	_, err = c.Do(context.Background(), access.OpExport, access.ExportRequest{Format: audit.FormatJSONL}, access.Discard)
	var ae *access.Error
	if !errors.As(err, &ae) || ae.Code != "bad_request" || !errors.Is(err, access.ErrBadRequest) {
		t.Fatalf("no purpose: %v, want an access.Error bad_request", err)
	}
	if head, _ := l.Head(); head != 4 {
		t.Fatalf("head %d: a refused request was recorded", head)
	}

	// A peer that is not allowed gets 403 with a JSON error, on every
	// request, and nothing is recorded. (The test runs as one uid: the
	// server's decision is made to refuse it.)
	var seen Cred
	s.allow = func(c Cred) bool { seen = c; return false }
	_, err = Dial(context.Background(), Path(dir))
	if !errors.As(err, &ae) || ae.Code != "forbidden" {
		t.Fatalf("refused peer: %v, want forbidden", err)
	}
	_, err = c.Do(context.Background(), access.OpHash, access.HashRequest{Ask: access.Ask{Purpose: "PATRQT"}, Patient: "hk1-0123456789abcdef0123456789abcdef"}, access.Discard)
	if !errors.As(err, &ae) || ae.Code != "forbidden" {
		t.Fatalf("refused peer on an open connection: %v, want forbidden", err)
	}
	if seen.UID != uint32(os.Getuid()) {
		t.Fatalf("the decision saw %+v, not this process's credentials", seen)
	}
	if head, _ := l.Head(); head != 4 {
		t.Fatalf("head %d: a refused peer's request was recorded", head)
	}
}

// TestDialWithoutServer: no socket, or a socket nobody listens on, are
// told apart, and the client removes nothing.
func TestDialWithoutServer(t *testing.T) {
	dir := t.TempDir()
	if _, err := Dial(context.Background(), Path(dir)); !errors.Is(err, ErrNoSocket) {
		t.Fatalf("no socket: %v", err)
	}
	ln, err := net.Listen("unix", Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens: a crashed server
	if _, err := Dial(context.Background(), Path(dir)); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("stale socket: %v", err)
	}
	if _, err := os.Lstat(Path(dir)); err != nil {
		t.Fatalf("the client removed the socket: %v", err)
	}
}

// TestSocketExportOfDamagedLog: over the socket, an export of a log with a
// record changed in place streams every record and ends with the trailer
// error export_damaged, which the client returns as an error that is
// audit.ErrExportDamaged, naming the record (the command then keeps the
// output and exits 1). Until h-audit12 it ended with a Custos-Result.
func TestSocketExportOfDamagedLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	l, err := audit.Open(path, audit.Options{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(context.Background(), audit.Entry{Action: audit.ActionResourcesList, Outcome: audit.OutcomeAllow}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Record 2 changed in place, as an editor of the file would: same
	// length, still canonical, no longer its stored hash.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"seq":2,`))
	j := bytes.Index(b[i:], []byte(`"action":"resources/list"`))
	if i < 0 || j < 0 {
		t.Fatal("record 2 not found in the file")
	}
	copy(b[i+j:], `"action":"resources/lisT"`)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err = audit.Open(path, audit.Options{Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s, err := Listen(Path(dir), Config{Service: access.New(l, nil, dir, nil)})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	c, err := Dial(context.Background(), Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	_, err = c.Do(context.Background(), access.OpExport, access.ExportRequest{Ask: access.Ask{Purpose: "HOPERAT"}, Format: audit.FormatJSONL}, func(r io.Reader) error {
		_, err := io.Copy(&out, r)
		return err
	})
	var ae *access.Error
	if !errors.As(err, &ae) || ae.Code != "export_damaged" || !errors.Is(err, audit.ErrExportDamaged) || !strings.Contains(ae.Message, "seq 2: hash_mismatch") {
		t.Fatalf("export of a damaged log over the socket: %v, want export_damaged naming seq 2", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 4 || !strings.Contains(out.String(), `"action":"resources/lisT"`) {
		t.Errorf("the output is not every record as stored (%d lines):\n%s", n, out.String())
	}
}
