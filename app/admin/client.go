package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/custos-mcp/custos/audit/access"
)

// Errors of Dial.
var (
	// ErrNoSocket: there is no admin socket: no server runs on the data
	// directory (or one that predates the socket). The caller may open
	// the log itself, under its exclusive lock.
	ErrNoSocket = errors.New("admin: no admin socket")
	// ErrNoAnswer: the socket exists but nobody accepts connections on it,
	// or the connection was closed before the ping was answered: a server
	// is starting or stopping, or crashed (also while answering) and left it. The caller
	// may try the log's lock; it must not delete the socket.
	ErrNoAnswer = errors.New("admin: the admin socket does not answer")
	// ErrOtherServer: a server answers on the socket, but it serves
	// another data directory (the socket file is a symlink to, or a copy
	// of, another server's socket), or does not say which, or it runs as
	// an account that cannot be the directory's server (neither root nor
	// the owner of its audit log: an impostor). Nothing was
	// sent to it; the caller must not fall back to the files either:
	// remove the stray socket file once no server of this directory runs.
	ErrOtherServer = errors.New("admin: the admin socket is answered by the server of another data directory")
)

// Client is a connection to a running server's admin socket.
type Client struct {
	path string
	hc   *http.Client
}

// pingTimeout bounds Dial's first request (a variable for tests).
var pingTimeout = 10 * time.Second

// Dial connects to the admin socket at path and checks that a server
// answers (GET /v1/ping). It fails with ErrNoSocket or ErrNoAnswer when no
// server is there, and with an *access.Error (code "forbidden") when the
// server refuses this account.
func Dial(ctx context.Context, path string) (*Client, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoSocket
	}
	// dialed: a connection to the server was made; heard: the server
	// sent something on one. A ping that failed with a connection made
	// and nothing heard was closed unanswered, however the transport
	// words it (EOF, EPIPE, ECONNRESET, "server closed idle connection",
	// depending on whether the close came before, while or after the
	// request was written).
	var dialed, heard atomic.Bool
	c := &Client{path: path, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			addr, release, err := sockAddr(path)
			if err != nil {
				return nil, err
			}
			defer release()
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", addr)
			if err != nil {
				return nil, err
			}
			if err := checkServer(conn, path); err != nil {
				conn.Close()
				return nil, err
			}
			dialed.Store(true)
			return heardConn{conn, &heard}, nil
		},
		MaxIdleConns:    1,
		IdleConnTimeout: 30 * time.Second,
	}}}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://custos-admin/v1/ping", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Refused, gone, or closed before any answer (a server killed
		// while it answered the ping): nobody serves on the socket. Only
		// the ping was sent, so the caller may go on to the log's lock.
		closedUnanswered := dialed.Load() && !heard.Load() && pctx.Err() == nil
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) || closedUnanswered ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, fmt.Errorf("%w: %s", ErrNoAnswer, path)
		}
		if ue := (*url.Error)(nil); errors.Is(err, ErrOtherServer) && errors.As(err, &ue) {
			return nil, ue.Err // checkServer's own words, without the HTTP request's
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("admin: %s: a server accepted the connection but did not answer within %v (suspended, or overloaded); its audit log stays locked meanwhile: retry, or check the server", path, pingTimeout)
		}
		return nil, fmt.Errorf("admin: %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readError(resp)
	}
	var p Ping
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || !p.OK {
		return nil, fmt.Errorf("admin: %s: not a custos admin socket", path)
	}
	// The socket's directory is the data directory the caller means; the
	// server must be the one serving it, not one reached through a
	// symlink or a socket file copied from elsewhere.
	want, err := dirID(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("admin: %s: %w", path, err)
	}
	if p.Dir != want && p.Dir == (DirID{}) {
		c.Close()
		return nil, fmt.Errorf("%w: %s answers for pid %d without saying which data directory it serves (a custos older than this command, still running after an upgrade?): restart it, or use the matching custos", ErrOtherServer, path, p.PID)
	}
	if p.Dir != want {
		c.Close()
		return nil, fmt.Errorf("%w: %s answers for pid %d, whose data directory is not %s (device %d, inode %d; it serves device %d, inode %d)", ErrOtherServer, path, p.PID, filepath.Dir(path), want.Dev, want.Ino, p.Dir.Dev, p.Dir.Ino)
	}
	return c, nil
}

// heardConn is a connection that sets heard once it has read anything.
type heardConn struct {
	net.Conn
	heard *atomic.Bool
}

func (c heardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.heard.Store(true)
	}
	return n, err
}

// checkServer checks, before anything is sent on conn, that the process
// at its other end may be the server of the data directory holding the
// socket at path: per the kernel (SO_PEERCRED), it runs as root or as the
// owner of the data directory itself. Anyone else (another account that
// put a socket in a data directory it can write to) could answer a forged
// ping and forged results, and would receive the requests; such an
// account can also replace the files in the directory (the audit log
// included, so owning the log proves nothing), but not change who owns
// the directory.
func checkServer(conn net.Conn, path string) error {
	cred, err := PeerCred(conn)
	if err != nil {
		return err
	}
	if cred.UID == 0 {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: %s answers, but its directory cannot be read (%v)", ErrOtherServer, path, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != cred.UID {
		return fmt.Errorf("%w: %s is answered by a process of uid %d (pid %d), which neither is root nor owns the data directory %s; if the server runs as that account, make it the directory's owner (and mode 0700)", ErrOtherServer, path, cred.UID, cred.PID, dir)
	}
	return nil
}

// Close releases the client's idle connection.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Do runs op with req on the server and hands the output to consume,
// which must read it to the end. The output counts only if the server
// ended it with a Result: otherwise Do returns the server's error (an
// *access.Error) even if consume succeeded.
func (c *Client) Do(ctx context.Context, op access.Op, req any, consume func(io.Reader) error) (access.Result, error) {
	return c.DoProgress(ctx, op, req, consume, nil)
}

// DoProgress is Do that asks the server for the operation's progress and
// hands each report to progress (nil: Do, which does not ask), from the
// goroutine reading the output (consume's), before DoProgress returns.
// consume gets the output byte for byte as with Do. A server that
// predates progress answers without it: progress is then never called.
func (c *Client) DoProgress(ctx context.Context, op access.Op, req any, consume func(io.Reader) error, progress func(access.Progress)) (access.Result, error) {
	var hdr http.Header
	if progress != nil {
		hdr = http.Header{HeaderProgress: {ProgressFrames}}
	}
	resp, err := c.post(ctx, string(op), req, hdr)
	if err != nil {
		return access.Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return access.Result{}, readError(resp)
	}
	var body io.Reader = resp.Body
	if resp.Header.Get(HeaderProgress) == ProgressFrames {
		body = &deframer{r: resp.Body, progress: progress}
	}
	cerr := consume(body)
	if cerr == nil {
		// The trailers follow the body (and, framed, the last progress).
		_, cerr = io.Copy(io.Discard, body)
	}
	if t := resp.Trailer.Get(TrailerError); t != "" {
		e := &access.Error{}
		if json.Unmarshal([]byte(t), e) != nil {
			e = &access.Error{Code: "internal", Message: t}
		}
		return access.Result{}, e
	}
	if errors.Is(cerr, io.ErrUnexpectedEOF) {
		// The server closed the stream mid-way: it cuts off a caller that
		// stopped reading for its stall limit (or it stopped).
		return access.Result{}, fmt.Errorf("admin: %s: the server's output ended early (the server cuts off a command that stops reading its output for longer than its stall limit, %v by default, or it stopped): %w", c.path, DefaultWriteStall, cerr)
	}
	if cerr != nil {
		return access.Result{}, cerr
	}
	var res access.Result
	t := resp.Trailer.Get(TrailerResult)
	if t == "" || json.Unmarshal([]byte(t), &res) != nil {
		return access.Result{}, fmt.Errorf("admin: %s: the server's output ended early (no result)", c.path)
	}
	return res, nil
}

// Sync asks the server to run one FHIR sync now (POST /v1/sync) with req
// and decodes its result into out. It returns the server's error (an
// *access.Error) when the sync failed.
func (c *Client) Sync(ctx context.Context, req, out any) error {
	resp, err := c.post(ctx, "sync", req, nil)
	if err != nil {
		return err
	}
	return c.decode(resp, out, "sync result")
}

// decode decodes resp's JSON body (what names it in an error) into out,
// or returns the server's error when it did not answer 200.
func (c *Client) decode(resp *http.Response, out any, what string) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRequest)).Decode(out); err != nil {
		return fmt.Errorf("admin: %s: unreadable %s: %v", c.path, what, err)
	}
	return nil
}

// PolicyStatus asks the server for the policy in force and the last
// candidate it refused (GET /v1/policy) and decodes the answer into out.
// A server that does not report it answers an *access.Error with code
// "not_found".
func (c *Client) PolicyStatus(ctx context.Context, out any) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://custos-admin/v1/policy", nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("admin: %s: %w", c.path, err)
	}
	return c.decode(resp, out, "policy status")
}

// post sends req as JSON to POST /v1/<name>, with the headers hdr.
func (c *Client) post(ctx context.Context, name string, req any, hdr http.Header) (*http.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://custos-admin/v1/"+name, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hr)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		// The access record may have been written: say only what is known.
		return nil, fmt.Errorf("admin: %s: the server closed the connection before answering (it stopped or is stopping); no output was received: run the command again", c.path)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
		// The connection could not be made: the server stopped after the
		// ping (its socket removed, or nobody accepts on it).
		return nil, fmt.Errorf("admin: %s: the server stopped before the request reached it (its socket is gone or refuses connections); nothing was sent: run the command again", c.path)
	}
	if err != nil {
		return nil, fmt.Errorf("admin: %s: %w", c.path, err)
	}
	return resp, nil
}

func readError(resp *http.Response) error {
	e := &access.Error{}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, e) != nil || e.Code == "" {
		return fmt.Errorf("admin: the server answered %s", resp.Status)
	}
	return e
}
