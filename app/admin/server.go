package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/custos-mcp/custos/audit/access"
)

// SocketName is the admin socket's name in the data directory.
const SocketName = "admin.sock"

// Path is the admin socket of data directory dir.
func Path(dir string) string { return filepath.Join(dir, SocketName) }

// maxRequest bounds a request body (anchor lines of a verification
// included).
const maxRequest = 16 << 20

// Config configures Listen.
type Config struct {
	// Service runs the operations; required.
	Service *access.Service
	// Groups are gids whose members may use the socket besides the
	// server's own uid and root; empty: none (socket mode 0600).
	Groups []uint32
	// Logger receives the operational log (refused peers, failed
	// operations); nil discards.
	Logger *slog.Logger
	// Sync, if set, runs one FHIR sync now for POST /v1/sync ('custos
	// sync' next to a running server, which holds the audit log the sync
	// is recorded in). caller is the peer the kernel reports; req is the
	// request body (JSON). It returns the result, encoded as JSON, or an
	// error: an *access.Error keeps its code, any other is "sync_failed".
	// nil: POST /v1/sync answers 404 not_found.
	Sync func(ctx context.Context, caller access.Caller, req []byte) (any, error)
	// PolicyStatus, if set, answers GET /v1/policy ('custos policy
	// status'): the policy in force and the last candidate refused, as
	// the server holds them in memory (the same state its metrics show;
	// no record of the log is read, so none is written). It returns a
	// value encoded as JSON, which must hold no secret.
	// nil: GET /v1/policy answers 404 not_found.
	PolicyStatus func() any
	// WriteStall bounds how long the server waits for a caller to accept
	// each piece of an output (and to send its request body): a caller
	// that stops reading (a suspended command, a peer that never reads)
	// would otherwise keep the operation's read transaction on the audit
	// log open for as long as it likes, and bbolt cannot remap the log
	// while one is open, so once the log must grow every append would
	// wait for it. The operation then fails (the output is incomplete:
	// no Custos-Result) and its transaction ends. Zero: DefaultWriteStall.
	WriteStall time.Duration
}

// DefaultWriteStall is Config.WriteStall's default: long enough for a
// reader that pauses (a pager, a slow disk's flush), short enough that a
// stalled one does not hold the log for long. The log must rarely grow
// its mapping (bbolt doubles it up to 1 GiB, then adds 1 GiB), so a stall
// stops appends only if it falls on such a growth.
const DefaultWriteStall = time.Minute

// Server serves the admin socket.
type Server struct {
	cfg   Config
	allow func(Cred) bool // Allowed for this server's uid and groups
	ln    net.Listener
	hs    *http.Server
	path  string
	dir   DirID // the data directory's, for Ping
}

// Listen binds the admin socket at path. The caller must hold the audit
// log's exclusive lock: a socket file already at path is then stale (left
// by a server that crashed) and is replaced.
func Listen(path string, cfg Config) (*Server, error) {
	if cfg.Service == nil {
		return nil, errors.New("admin: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WriteStall <= 0 {
		cfg.WriteStall = DefaultWriteStall
	}
	dir, err := dirID(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("admin: the data directory: %w", err)
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("admin: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin: removing the stale socket: %w", err)
		}
	}
	addr, release, err := sockAddr(path)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", addr)
	if err != nil {
		release()
		return nil, fmt.Errorf("admin: listen: %w", err)
	}
	ln = &releasingListener{Listener: ln, release: sync.OnceFunc(release)}
	mode := os.FileMode(0o600)
	if len(cfg.Groups) > 0 {
		mode = 0o660
		if err := os.Chown(path, -1, int(cfg.Groups[0])); err != nil {
			ln.Close()
			return nil, fmt.Errorf("admin: giving the socket to admin group %d: %w", cfg.Groups[0], err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin: chmod: %w", err)
	}
	self := uint32(os.Getuid())
	s := &Server{cfg: cfg, ln: ln, path: path, dir: dir, allow: func(c Cred) bool { return Allowed(c, self, cfg.Groups) }}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", s.ping)
	mux.HandleFunc("POST /v1/sync", s.sync)
	mux.HandleFunc("GET /v1/policy", s.policyStatus)
	mux.HandleFunc("POST /v1/{op}", s.op)
	// Anything else (another path, GET of an operation) gets a JSON
	// error too, as every error of the socket does, not the mux's text.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, &access.Error{Code: "not_found", Message: fmt.Sprintf("admin socket: no %s %s (operations are POST /v1/<op>; GET /v1/ping)", r.Method, r.URL.Path)})
	})
	s.hs = &http.Server{
		Handler:           s.checkPeer(mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			cred, err := PeerCred(c)
			return context.WithValue(ctx, credKey{}, credResult{cred, err})
		},
	}
	return s, nil
}

// releasingListener calls release after the listener closed (and removed
// the socket by its address, which release may invalidate). Close runs
// twice (http.Server.Shutdown, then Server.Shutdown): release must be
// idempotent, since it closes a descriptor number that may be reused.
type releasingListener struct {
	net.Listener
	release func()
}

func (l *releasingListener) Close() error {
	err := l.Listener.Close()
	l.release()
	return err
}

// Serve serves connections until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve() error {
	err := s.hs.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// then closes them; the socket file is removed.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.hs.Shutdown(ctx)
	if err != nil {
		s.hs.Close()
	}
	s.ln.Close()
	return err
}

type credKey struct{}

type credResult struct {
	cred Cred
	err  error
}

// checkPeer refuses every request of a connection whose peer is not
// Allowed.
func (s *Server) checkPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A deadline left by the previous request of this connection
		// (lazyWriter) must not cut this one short.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		cr, _ := r.Context().Value(credKey{}).(credResult)
		if cr.err != nil || !s.allow(cr.cred) {
			s.cfg.Logger.Warn("admin socket: peer refused", "uid", cr.cred.UID, "gid", cr.cred.GID, "pid", cr.cred.PID, "err", cr.err)
			writeError(w, http.StatusForbidden, &access.Error{Code: "forbidden", Message: "admin socket: this account may not use the server's admin socket"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Ping is the answer to GET /v1/ping: that a server holds the log, and
// which: Dir identifies the data directory it serves, so that a client
// reaching it through a socket file in another directory (a symlink, a
// copied or moved socket) can tell it is not that directory's server.
type Ping struct {
	OK  bool  `json:"ok"`
	PID int   `json:"pid"`
	Dir DirID `json:"dir"`
}

// DirID identifies a directory on this host: its device and inode, the
// same through every path (relative, symlinked, with "..") that leads to
// it.
type DirID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// dirID is the DirID of directory dir (symlinks followed).
func dirID(dir string) (DirID, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return DirID{}, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.IsDir() {
		return DirID{}, fmt.Errorf("%s is not a directory", dir)
	}
	return DirID{Dev: uint64(sys.Dev), Ino: sys.Ino}, nil
}

func (s *Server) ping(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Ping{OK: true, PID: os.Getpid(), Dir: s.dir})
}

// Trailers of an operation's response.
const (
	TrailerResult = "Custos-Result" // the access.Result (JSON): the output is complete
	TrailerError  = "Custos-Error"  // an access.Error (JSON): the output is incomplete
)

// request reads a request's body (bounded) and names its caller from the
// connection's peer credentials; on a bad body it answers 400 and
// returns ok false.
func (s *Server) request(w http.ResponseWriter, r *http.Request) (body []byte, caller access.Caller, ok bool) {
	// The body must arrive within the stall limit. On an error the
	// deadline stays: the server drains an unread body before it answers,
	// and must not wait for it either; the connection is closed.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.WriteStall))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil || len(body) > maxRequest {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusBadRequest, &access.Error{Code: "bad_request", Message: "admin socket: request body unreadable, too large, or not sent in time"})
		return nil, access.Caller{}, false
	}
	rc.SetReadDeadline(time.Time{})
	cr := r.Context().Value(credKey{}).(credResult)
	return body, access.Caller{Account: access.Account(cr.cred.UID), Source: SocketName}, true
}

func (s *Server) op(w http.ResponseWriter, r *http.Request) {
	op := access.Op(r.PathValue("op"))
	body, caller, ok := s.request(w, r)
	if !ok {
		return
	}
	w.Header().Set("Trailer", TrailerResult+", "+TrailerError)
	lw := &lazyWriter{w: w, rc: http.NewResponseController(w), stall: s.cfg.WriteStall}
	if op.EndsAtClose() {
		// The Service's Close ends the operation at its next write; a
		// write blocked on a caller who stopped reading ends now too,
		// not when Shutdown's grace runs out and closes the connection.
		stop := context.AfterFunc(s.cfg.Service.Closing(), lw.end)
		defer stop()
	}
	var out io.Writer = lw
	var progress func(access.Progress)
	if r.Header.Get(HeaderProgress) == ProgressFrames {
		// Sent with the 200 (the first frame); an error answered before
		// any frame is the plain JSON error.
		w.Header().Set(HeaderProgress, ProgressFrames)
		fw := &frameWriter{w: lw, flush: lw.rc.Flush}
		out, progress = fw, fw.progress
	}
	res, err := s.cfg.Service.RunProgress(r.Context(), caller, op, body, out, progress)
	lw.finish()
	if lw.cut {
		s.cfg.Logger.Warn("admin socket: a caller stopped reading for longer than the stall limit; its operation was cut off so that it holds no read transaction on the audit log",
			"op", string(op), "caller", caller.Account, "stall_limit", s.cfg.WriteStall.String())
	}
	// What is left (buffered output, the trailers) is sent after this
	// handler returns, under a fresh deadline.
	lw.rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteStall))
	if err != nil {
		e := &access.Error{Code: access.Code(err), Message: err.Error()}
		if !lw.started {
			w.Header().Del("Trailer")
			w.Header().Del(HeaderProgress)
			writeError(w, status(e.Code), e)
			return
		}
		b, _ := json.Marshal(e)
		w.Header().Set(TrailerError, string(b))
		return
	}
	if !lw.started {
		w.WriteHeader(http.StatusOK)
	}
	b, _ := json.Marshal(res)
	w.Header().Set(TrailerResult, string(b))
}

// policyStatus answers Config.PolicyStatus as one JSON document.
func (s *Server) policyStatus(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.PolicyStatus == nil {
		writeError(w, http.StatusNotFound, &access.Error{Code: "not_found", Message: "admin socket: this server does not report its policy status (it predates custos policy status)"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.cfg.PolicyStatus())
}

// sync runs Config.Sync and answers its result as one JSON document.
func (s *Server) sync(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Sync == nil {
		writeError(w, http.StatusNotFound, &access.Error{Code: "not_found", Message: "admin socket: this server runs no FHIR sync (serve --sync-fhir-base)"})
		return
	}
	body, caller, ok := s.request(w, r)
	if !ok {
		return
	}
	res, err := s.cfg.Sync(r.Context(), caller, body)
	if err != nil {
		var e *access.Error
		if !errors.As(err, &e) {
			e = &access.Error{Code: "sync_failed", Message: err.Error()}
		}
		s.cfg.Logger.Warn("admin socket: sync failed", "caller", caller.Account, "code", e.Code)
		writeError(w, status(e.Code), e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

// lazyWriter sends the 200 header with the first byte of output, and
// gives the caller stall to accept each write (Config.WriteStall).
type lazyWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	stall   time.Duration
	started bool
	cut     bool // a write failed past its deadline: the caller stalled

	mu    sync.Mutex // guards the deadline's owner: ended, done
	ended bool       // end ran: the server is closing, every write fails
	done  bool       // finish ran: the connection is no longer this operation's
}

// errEnded fails the writes of an operation the server ended at Close.
var errEnded = errors.New("admin socket: the server is closing")

// end fails the write in progress at once (a write deadline in the past)
// and every later one, from any goroutine, until finish.
func (l *lazyWriter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.ended = true
		l.rc.SetWriteDeadline(time.Now())
	}
}

// finish marks the operation over: end no longer touches the connection,
// which may carry the caller's next request.
func (l *lazyWriter) finish() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	ended := l.ended
	if !ended {
		l.rc.SetWriteDeadline(time.Now().Add(l.stall))
	}
	l.mu.Unlock()
	if ended {
		return 0, errEnded
	}
	if !l.started {
		l.w.Header().Set("Content-Type", "application/octet-stream")
		l.w.WriteHeader(http.StatusOK)
		l.started = true
	}
	n, err := l.w.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.mu.Lock()
		l.cut = !l.ended // ended at Close, not by the caller's stall
		l.mu.Unlock()
	}
	return n, err
}

func status(code string) int {
	switch code {
	case "bad_request":
		return http.StatusBadRequest
	case "forbidden":
		return http.StatusForbidden
	case "not_found":
		return http.StatusNotFound
	case "no_checkpoint", "checkpoint_mismatch", "not_empty", "busy":
		return http.StatusConflict
	case "sync_failed":
		return http.StatusBadGateway
	case "not_recorded":
		return http.StatusServiceUnavailable
	case "no_room":
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, code int, e *access.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(e)
}
