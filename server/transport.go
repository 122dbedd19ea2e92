package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/netutil"

	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/oauth"
)

// ServeStdio serves MCP over the given transport (normally
// a *StdioTransport) as one fixed identity, until the client
// disconnects or ctx is done.
func (s *Server) ServeStdio(ctx context.Context, t mcp.Transport, id Identity) error {
	if id.Source == "" {
		id.Source = "stdio"
	}
	return s.newMCPServer(fixedIdentity(id)).Run(ctx, paramsCheckedTransport{t, s.log})
}

// MCPPath is where the Streamable HTTP endpoint is mounted.
const MCPPath = "/mcp"

// HTTPHandler returns the Streamable HTTP handler: bearer tokens verified by
// tokens, cross-origin requests refused, the MCP endpoint at MCPPath serving
// both protocol revisions (see mcpHandler). The source address of every
// request is resolved once (clientaddr, Config.TrustedProxies); nothing
// below reads RemoteAddr.
func (s *Server) HTTPHandler(tokens *Tokens) http.Handler {
	h := s.mcpHandler(bearerIdentity)
	protected := oneBearerToken(auth.RequireBearerToken(tokens.Verify, nil)(noteCaller(s.rateLimited(h))))
	mux := http.NewServeMux()
	mux.Handle(MCPPath, noStore(s.auditRejections(crossOriginRefused(protected), tokens.Verify)))
	return spareSlots(closeAfterChunked(boundUnreadBody(clientaddr.Handler(s.cfg.TrustedProxies, mux))))
}

// boundUnreadBody bounds what a request answered before its body was
// read to its end costs (a request refused on its headers: no token or a
// bad one, a cross-origin request, a content coding, a principal past its
// rate; or on a body over the limit). net/http, before it writes the
// header of a handler that left less than 256 KiB of the body unread,
// reads the rest of the body to keep the connection for the next request;
// a client that trickled a body without a token got its 401 only when
// ReadTimeout (30 s by default) cut that read, and held the connection
// until then (TestRefusedSlowBodyIsAnsweredAtOnce). That read now has
// drainGrace: a client that sent its body keeps its connection (the rest
// is already there), one that trickles it is answered and closed after
// drainGrace (net/http closes a connection whose drain failed).
//
// A refused request's connection is kept when its body came: h-edge4 and
// h-review54 closed every such connection (and every one whose token did
// not verify), and each request of an unauthenticated flood on kept-alive
// connections then cost custos a TLS handshake: 387 µs of CPU a refusal
// instead of 65, and the clinician's p99 under issue 16's flood went from
// 1.25 to 2.33 times its unloaded p99 (the target is under 2;
// docs/benchmarks.md, "Unauthenticated flood";
// TestRefusedRequestWithItsBodyKeepsItsConnection). A connection kept
// after a refusal is a slot of http.max_connections until IdleTimeout,
// unless the slots run short (connSlots: closed after its refusal above
// three quarters of them, and first when the last is taken).
func boundUnreadBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		b := &endSeen{ReadCloser: r.Body}
		r.Body = b
		rc := http.NewResponseController(w)
		bound := func() {
			if !b.end.Load() {
				rc.SetReadDeadline(time.Now().Add(drainGrace))
			}
		}
		bw := &beforeHeader{ResponseWriter: w, fn: func(http.Header) { bound() }}
		next.ServeHTTP(bw, r)
		bw.once() // a handler that wrote nothing: net/http writes the header after it returns
		// After the handler net/http closes the body by reading what is
		// left of it (up to 256 KiB): within drainGrace too.
		bound()
	})
}

// drainGrace is how long net/http may read the rest of a body the handler
// left unread before it answers (boundUnreadBody): long enough for bytes
// already sent, short enough that a trickled body holds nothing.
const drainGrace = 250 * time.Millisecond

// endSeen is a request body that notes when a Read returned its end.
type endSeen struct {
	io.ReadCloser
	end atomic.Bool
}

func (b *endSeen) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.end.Store(true)
	}
	return n, err
}

// closeAfterChunked closes the connection after answering a request whose
// body came with Transfer-Encoding (chunked): RFC 9112 §6.1 says a server
// that receives both Transfer-Encoding and Content-Length "MUST close the
// connection after responding to such a request" (the mismatch is how
// request smuggling desynchronizes a proxy from its backend), but net/http
// deletes the Content-Length header of such a request before any handler
// sees it, and kept the connection open: a request with Content-Length: 5
// and Transfer-Encoding: chunked and a second request pipelined behind it
// were both answered on one connection
// (TestChunkedRequestClosesTheConnection). Every chunked request is
// closed after, since the two cannot be told apart here; MCP clients send
// Content-Length.
func closeAfterChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// crossOriginRefused answers a request that a browser sent from another
// origin (http.CrossOriginProtection's test: Sec-Fetch-Site, else Origin
// against Host) with 403, whatever its method. CrossOriginProtection.Handler
// judges only unsafe methods and passes GET, HEAD and OPTIONS unjudged, so
// a GET naming a session, with Origin https://evil.example and
// Sec-Fetch-Site cross-site, opened that session's SSE stream (200); the
// MCP specification (2025-11-25, Streamable HTTP, Security Warning) says
// servers "MUST validate the Origin header on all incoming connections"
// and, "if the Origin header is present and invalid, MUST respond with
// HTTP 403 Forbidden" (TestCrossOriginGETIsRefused). The answer is
// CrossOriginProtection's, which quotes no header.
func crossOriginRefused(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		judged := r
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			// Check passes these methods unread: judge a copy as a POST.
			c := *r
			c.Method = http.MethodPost
			judged = &c
		}
		if err := p.Check(judged); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// noStore makes every response of the MCP endpoint say Cache-Control:
// no-store (RFC 9111 §5.2.2.5): what it serves is PHI, or about it, and no
// cache on the way (a proxy, the client's HTTP cache) may keep a copy. The
// go-sdk sets "no-cache, no-transform" on its responses, which lets a cache
// store them (it only has to revalidate before reuse); the header is
// replaced when the response's header is written, keeping no-transform.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&beforeHeader{ResponseWriter: w, fn: func(h http.Header) {
			h.Set("Cache-Control", "no-store, no-transform")
		}}, r)
	})
}

// beforeHeader calls fn with the response's header once, just before the
// header is written (explicitly, or by the first Write or Flush). It keeps
// http.Flusher (the SSE streams flush) and unwraps for
// http.ResponseController.
type beforeHeader struct {
	http.ResponseWriter
	fn   func(http.Header)
	done bool
}

func (w *beforeHeader) once() {
	if !w.done {
		w.done = true
		w.fn(w.ResponseWriter.Header())
	}
}

func (w *beforeHeader) WriteHeader(status int) {
	w.once()
	w.ResponseWriter.WriteHeader(status)
}

func (w *beforeHeader) Write(b []byte) (int, error) {
	w.once()
	return w.ResponseWriter.Write(b)
}

func (w *beforeHeader) Flush() {
	w.once()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *beforeHeader) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// oneBearerToken answers a request whose Authorization header is given
// more than once, or is not "Bearer" and one token, with 400
// invalid_request (RFC 6750 §3.1), as oauth.Verifier.Middleware does. The
// go-sdk's RequireBearerToken reads only the first of several headers
// (Header.Get), so a request with a valid token and a second header was
// served as if the second were not there.
func oneBearerToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := oauth.BearerToken(r); errors.Is(err, oauth.ErrMalformedRequest) {
			oauth.InvalidRequest(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SessionTimeout is how long an idle 2025-11-25 session lives (automatic
// logoff) unless Config.SessionTimeout says otherwise.
const SessionTimeout = 30 * time.Minute

// mcpHandler serves both MCP protocol revisions on one endpoint, with one
// *mcp.Server (one middleware, one decision point) behind two go-sdk
// Streamable HTTP handlers. The SDK serves the stateless revision
// (2026-07-28, SEP-2575) only from a handler with
// StreamableHTTPOptions.Stateless set, and sessions only from one without,
// so each request is routed (statelessRequest):
//
//   - MCP-Protocol-Version header a revision >= 2026-07-28
//     (statelessHeader): the stateless handler (any Mcp-Session-Id is
//     ignored, as the revision has no sessions);
//   - MCP-Protocol-Version header of an older revision: the stateful handler
//     (initialize, Mcp-Session-Id, idle sessions closed after
//     SessionTimeout, at most Config.MaxSessions per principal: sessions.go);
//     one whose body carries _meta "io.modelcontextprotocol/protocolVersion"
//     is answered by refuseLegacyMeta and reaches neither;
//   - no header: a POST whose body is a server/discover request or carries
//     _meta "io.modelcontextprotocol/protocolVersion" >= 2026-07-28 goes
//     to the stateless handler (which then answers the missing header as
//     the revision demands); one whose _meta names an earlier version is
//     answered by refuseLegacyMeta; everything else (initialize, GET,
//     DELETE, batches) goes to the stateful one. A batch of which a
//     message carries a _meta version is answered by checkParams
//     (checkBatch, errBatchMeta).
//
// Stateless requests are answered with a single application/json response
// (StreamableHTTPOptions.JSONResponse), except subscriptions/listen, whose
// notifications need an SSE stream: a read is one response, and JSON
// framing cost a third less CPU than SSE under load (bench/load).
//
// Before either, a call whose params the SDK could not decode, or whose
// Mcp-Name header differs from its params, is answered by checkParams
// (params.go): the SDK's own errors quote the client's input. So is a call
// whose numeric id the SDK would not answer unchanged (1.5 as 1, 2^63 as
// -2^63).
//
// Callers wrap the result with identity, Origin check, rate limit and
// rejection audit, so both revisions get exactly the same checks.
func (s *Server) mcpHandler(ident identityFunc) http.Handler {
	ms := s.newMCPServer(ident)
	get := func(*http.Request) *mcp.Server { return ms }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.log),
		SessionTimeout:      cmp.Or(s.cfg.SessionTimeout, SessionTimeout),
		MaxRequestBodyBytes: maxBody,
	})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.log),
		Stateless:           true,
		MaxRequestBodyBytes: maxBody,
	})
	statelessJSON := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger:              sdkLogger(s.log),
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: maxBody,
	})
	return s.routeMCP(newSessionCap(s, ms).handler(stateful), stateless, statelessJSON)
}

// routeMCP is mcpHandler's checks and routing in front of the go-sdk's
// handlers: sessions (the stateful handler behind the session cap),
// stateless (SSE) and statelessJSON. The checks read the body through its
// memo (bodyOf).
func (s *Server) routeMCP(sessions, stateless, statelessJSON http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuseRebinding(w, r) {
			return // a Host the SDK would refuse quoting it
		}
		if refuseContentCoding(w, r) {
			return // a compressed body, which neither handler would decode
		}
		if refuseVersionHeader(w, r) {
			return // a GET or DELETE with a header that is no revision
		}
		if refuseLastEventID(w, r) {
			return // a Last-Event-ID the SDK would quote back
		}
		w, answered := checkParams(w, r)
		if answered {
			return // params the SDK would quote back: answered without them
		}
		if ba, ok := w.(*batchAnswers); ok {
			defer ba.finish() // a batch's refused members, answered with the rest
		}
		if refuseLegacyMeta(w, r) {
			return // an earlier revision's request with a _meta version: its session's rules
		}
		s.emptyName(r)
		modern, method := statelessRequest(r)
		if modern {
			mirrorNotificationMethod(r)
			plainNameHeader(r)
		}
		switch {
		case !modern:
			sessions.ServeHTTP(w, r)
		case method == "subscriptions/listen":
			stateless.ServeHTTP(w, r)
		default:
			statelessJSON.ServeHTTP(w, r)
		}
	})
}

// mirrorNotificationMethod sets the Mcp-Method header of a 2026-07-28
// POST whose body is a notification and that has none, from the body's
// method. The revision requires the header on requests only ("header
// requirements for notification POSTs are not defined by this revision");
// the SDK's check demands it of notifications too, and refused with 400
// the notifications/cancelled that the TypeScript SDK
// (@modelcontextprotocol/client 2.4.0) sends, without it, when it closes
// a subscriptions/listen stream. A request (with an id) without the
// header is left alone and still refused.
func mirrorNotificationMethod(r *http.Request) {
	if r.Header.Get("Mcp-Method") != "" {
		return
	}
	if req := peekRequest(r); req != nil && !req.ID.IsValid() && req.Method != "" {
		r.Header.Set("Mcp-Method", req.Method)
	}
}

// maxBody bounds an MCP request body.
const maxBody = 1 << 20

// statelessRequest reports whether r follows protocol revision 2026-07-28
// or later (see mcpHandler), and its JSON-RPC method as far as known: the
// Mcp-Method header, which 2026-07-28 requires and the SDK checks against
// the body, or the body's. It may read the body of a POST without an
// MCP-Protocol-Version header; the body stays readable in full.
//
// A request with an older revision's header goes to the stateful
// handler, whatever its body says: refuseLegacyMeta has answered one whose
// _meta names a protocol version.
// The body is read as the go-sdk reads it (jsonrpc.DecodeMessage, metaOf:
// exact member names, the last of members given twice), so that what
// routes a request is what the SDK then judges it by. Read with
// encoding/json, params given twice, a first with the 2026-07-28 _meta and
// a last without, sent a request with no header to the stateless handler,
// where the SDK, seeing neither header nor _meta version, served it as an
// earlier revision without a session
// (TestOlderRevisionWithMetaVersionNeedsItsSession).
func statelessRequest(r *http.Request) (bool, string) {
	if statelessHeader(r.Header) {
		return true, r.Header.Get("Mcp-Method")
	}
	m := peekMessage(r)
	req := m.request()
	if req == nil {
		return false, "" // a batch, or not JSON-RPC: the stateful handler answers
	}
	v, _ := m.metaOf()[mcp.MetaKeyProtocolVersion].(string)
	if hv := r.Header.Get("Mcp-Protocol-Version"); hv != "" {
		// A header that is no revision with a _meta version: the stateless
		// handler answers -32022 with every supported revision (the SDK
		// takes one sorting after 2026-07-28, such as "v999.0.0", for a
		// later revision; it refuses one sorting before whichever handler
		// has it). Never an earlier revision's header.
		return v != "" && !revisionForm(hv), req.Method
	}
	return req.Method == "server/discover" || v >= ProtocolStateless, req.Method
}

// refuseLegacyMeta answers a POST of one JSON-RPC message whose
// params._meta names a protocol version (as the go-sdk reads it, a
// non-empty string) while its MCP-Protocol-Version header names no
// revision of 2026-07-28 or later, and reports whether it did:
//
//   - with an earlier revision's header and the same revision in _meta,
//     or with no header and an earlier one in _meta: errLegacyMeta (a
//     request of an earlier revision is served in its session);
//   - with an earlier revision's header and another version in _meta:
//     errVersionMismatch (the go-sdk's own -32020 quotes both).
//
// The first went to the stateless handler, which served it without
// initialize and without a session (HTTP 200, audited with an empty
// session, any Mcp-Session-Id ignored), out of reach of the
// missing-session refusal, the per-principal session cap and idle logoff;
// without the header the stateful handler answered -32022 "protocol
// version ... is not supported", of a revision the server supports. A
// header that is no revision is left to the stateful handler, which names
// it unsupported, and one of 2026-07-28 to the stateless handler, which
// compares it with the _meta.
func refuseLegacyMeta(w http.ResponseWriter, r *http.Request) bool {
	hv := r.Header.Get("Mcp-Protocol-Version")
	if statelessHeader(r.Header) || (hv != "" && !revisionForm(hv)) {
		return false
	}
	m := peekMessage(r)
	req := m.request()
	if req == nil {
		return false
	}
	v, _ := m.metaOf()[mcp.MetaKeyProtocolVersion].(string)
	switch {
	case v == "" || (hv == "" && v >= ProtocolStateless):
		return false
	case hv == "" || v == hv:
		answerJSONRPC(w, http.StatusBadRequest, req.ID, errLegacyMeta)
	default:
		answerJSONRPC(w, http.StatusBadRequest, req.ID, errVersionMismatch)
	}
	return true
}

var errLegacyMeta = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: a request of a protocol revision before ` + ProtocolStateless +
	` is served in the session initialize opened (Mcp-Session-Id header) and carries no params._meta["` + mcp.MetaKeyProtocolVersion +
	`"]; only a request of ` + ProtocolStateless + ` or later carries it, with an MCP-Protocol-Version header of the same revision`}

// statelessHeader reports whether h's MCP-Protocol-Version names a
// revision, in its YYYY-MM-DD form, of 2026-07-28 or later. Compared as a
// string only, "garbage" would be later than every revision and go to the
// stateless handler, which would then complain about _meta rather than the
// header; the stateful one names the unsupported header.
func statelessHeader(h http.Header) bool {
	v := h.Get("Mcp-Protocol-Version")
	return revisionForm(v) && v >= ProtocolStateless
}

// revisionForm reports whether v has the form of a protocol revision,
// YYYY-MM-DD (ten ASCII digits and dashes, nothing a client could hide a
// name or a secret in).
func revisionForm(v string) bool {
	if len(v) != len(ProtocolStateless) {
		return false
	}
	for i, c := range []byte(v) {
		if (i == 4 || i == 7) != (c == '-') || (c != '-' && (c < '0' || c > '9')) {
			return false
		}
	}
	return true
}

// refuseRebinding answers a request that reached a loopback address
// naming a Host that is not a loopback one with 403 naming the Host
// header, and reports whether it did. It is the go-sdk's DNS-rebinding
// protection, with the SDK's test (loopbackHost mirrors its
// util.IsLoopback), whose answer, `Forbidden: invalid Host header
// "<the header>"`, quotes client input back.
func refuseRebinding(w http.ResponseWriter, r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopbackHost(local.String()) || loopbackHost(r.Host) {
		return false
	}
	if cl := callerOf(r); cl != nil {
		cl.badHost = true // auditRejections records it as invalid_host
	}
	http.Error(w, "Forbidden: invalid Host header: a server listening on a loopback address answers only requests naming a loopback host (DNS rebinding protection; the value is not repeated)", http.StatusForbidden)
	return true
}

// loopbackHost reports whether addr (host, or host:port) is localhost or
// a loopback IP address, as the go-sdk's util.IsLoopback does.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// refuseContentCoding answers a POST whose body has a content coding
// other than identity (Content-Encoding: gzip, deflate, br, ...) with 415
// naming Content-Encoding and Accept-Encoding: identity (RFC 9110
// §15.5.16, §12.5.3), and reports whether it did. The body was read as
// JSON as it came and answered -32700 "the body is not one valid JSON
// value", which told a client that compressed its requests nothing of
// what it did wrong. The header's value is not repeated.
func refuseContentCoding(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				w.Header().Set("Accept-Encoding", "identity")
				http.Error(w, "Unsupported Media Type: a request body with a Content-Encoding is not supported; send it uncompressed", http.StatusUnsupportedMediaType)
				return true
			}
		}
	}
	return false
}

// refuseLastEventID answers a GET whose Last-Event-ID is not of the form
// the go-sdk parses (STREAM_INDEX, INDEX a non-negative integer) with 400
// naming the header, and reports whether it did. The SDK's own answer,
// `malformed Last-Event-ID "<the header>"`, quotes client input back. A
// header of that form is left to the SDK (which replays nothing: custos
// keeps no event store, and says "stream replay unsupported").
func refuseLastEventID(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || len(r.Header.Values("Last-Event-ID")) == 0 {
		return false
	}
	parts := strings.Split(r.Header.Get("Last-Event-ID"), "_")
	if len(parts) == 2 {
		if n, err := strconv.Atoi(parts[1]); err == nil && n >= 0 {
			return false
		}
	}
	http.Error(w, "Bad Request: malformed Last-Event-ID (want STREAM_INDEX; the value is not repeated)", http.StatusBadRequest)
	return true
}

// refuseVersionHeader answers a GET or DELETE whose MCP-Protocol-Version
// header is not of a revision's form (revisionForm) with 400 and the
// supported revisions, the answer the go-sdk gives an unsupported older
// revision, and reports whether it did. The SDK served such a header that
// sorts after "2026-07-28" (any starting with a letter): a GET opened the
// session's stream and a DELETE ended the session, though the
// specification answers an invalid header with 400 and the request should
// change nothing. A POST with it is left to the SDK, which answers -32022
// echoing the header in data.requested, as the 2026-07-28 revision asks
// (SECURITY.md).
func refuseVersionHeader(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get("Mcp-Protocol-Version")
	if r.Method == http.MethodPost || v == "" || revisionForm(v) {
		return false
	}
	answerUnsupportedVersion(w)
	return true
}

// answerUnsupportedVersion answers 400 with the supported revisions, as
// the go-sdk answers an MCP-Protocol-Version it does not support, without
// repeating the header.
func answerUnsupportedVersion(w http.ResponseWriter) {
	http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(mcp.SupportedProtocolVersions(), ",")+")", http.StatusBadRequest)
}

// IsLoopback reports whether addr ("host:port") names a loopback address.
// Plain HTTP is served only there; other addresses need TLS.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Defaults of HTTPOptions.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnections    = 1024
)

// HTTPOptions are the limits of the MCP HTTP server. A zero field takes its
// default.
type HTTPOptions struct {
	// TLSConfig serves HTTPS; nil serves plain HTTP, on a loopback address
	// only.
	TLSConfig *tls.Config
	// ReadHeaderTimeout bounds reading a request's headers (slow clients).
	// Default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Default DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response. Default 0, none: Streamable
	// HTTP holds SSE streams open, and a write timeout cuts them.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers. Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxConnections bounds the connections served at once on the
	// listener: give LimitConnections the same figure. The http.Server
	// counts its connections against it (ConnContext, ConnState), to
	// close those that never carried an authenticated request when the
	// slots run short (connSlots). Default DefaultMaxConnections.
	MaxConnections int
	// MaxRequestBodyBytes, if positive, bounds every request body (a longer
	// body fails to read); the MCP handler has its own 1 MiB limit, so only
	// smaller values tighten it. Default 0: the handler's limit.
	MaxRequestBodyBytes int64
	// Logger receives net/http's own error lines (see httpErrorLog), which
	// it would otherwise print to stderr as plain text. Default: discard.
	Logger *slog.Logger
}

// NewHTTPServer wraps h with the timeouts a server facing real clients
// needs. Without tlsConfig addr must be a loopback address.
func NewHTTPServer(addr string, h http.Handler, tlsConfig ...*tls.Config) (*http.Server, error) {
	var o HTTPOptions
	if len(tlsConfig) > 0 {
		o.TLSConfig = tlsConfig[0]
	}
	return NewHTTPServerWith(addr, h, o)
}

// NewHTTPServerWith is NewHTTPServer with explicit limits. Without
// o.TLSConfig addr must be a loopback address (ErrBadConfig otherwise).
func NewHTTPServerWith(addr string, h http.Handler, o HTTPOptions) (*http.Server, error) {
	if o.TLSConfig == nil && !IsLoopback(addr) {
		return nil, fmt.Errorf("%w: --listen %s: plain HTTP is only served on a loopback address (127.0.0.1, ::1); other addresses need TLS (--tls-cert, --tls-key)", ErrBadConfig, addr)
	}
	if o.ReadHeaderTimeout < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.IdleTimeout < 0 || o.MaxHeaderBytes < 0 || o.MaxRequestBodyBytes < 0 || o.MaxConnections < 0 {
		return nil, fmt.Errorf("%w: negative HTTP timeout or limit", ErrBadConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxRequestBodyBytes > 0 {
		h = http.MaxBytesHandler(h, o.MaxRequestBodyBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ErrorLog:          log.New(httpErrorLog{o.Logger}, "", 0),
		TLSConfig:         o.TLSConfig,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
	}
	newConnSlots(cmp.Or(o.MaxConnections, DefaultMaxConnections)).install(srv)
	return srv, nil
}

// LimitConnections returns ln accepting at most n connections open at
// once (0: DefaultMaxConnections): beyond them Accept waits until one
// closes, and a new connection waits in the kernel's listen queue, its
// bytes unread, its handshake (TLS) not begun. Each connection costs a
// goroutine and its buffers whatever it sends, and net/http has no bound
// of its own: wrap the TCP listener, before TLS, so that a connection
// that never completes its handshake counts too
// (TestConnectionsBeyondTheLimitWait).
func LimitConnections(ln net.Listener, n int) net.Listener {
	return netutil.LimitListener(ln, cmp.Or(n, DefaultMaxConnections))
}

// httpErrorLog turns the lines net/http logs (http.Server.ErrorLog) into
// records of an slog.Logger. A failed TLS handshake ("http: TLS handshake
// error from ADDR: ...": a client offering only TLS 1.2 or 1.1, plain HTTP
// to the TLS port, a TCP health check or port scan that sends nothing) is
// logged at debug as "TLS handshake failed": anyone can cause one per
// connection, and a load balancer's TCP check causes one every few
// seconds. Every other line (a handler's recovered panic, an accept
// error) is logged at warning as "HTTP server error". The lines name the
// peer's address and what went wrong, never a request's URI or headers.
type httpErrorLog struct{ log *slog.Logger }

func (w httpErrorLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(line, "http: TLS handshake error from "); ok {
		remote, why, _ := strings.Cut(rest, ": ")
		w.log.Debug("TLS handshake failed", "remote", remote, "err", why)
		return len(p), nil
	}
	w.log.Warn("HTTP server error", "err", line)
	return len(p), nil
}
