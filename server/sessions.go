package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server/clientaddr"
	"github.com/custos-mcp/custos/server/ops"
)

// DefaultMaxSessions is the number of 2025-11-25 sessions one principal may
// hold at once when Config.MaxSessions is 0. A session lives until the
// client ends it (DELETE) or it is idle for Config.SessionTimeout; without
// a cap one token could open 1,000 sessions in a second and hold them for
// half an hour.
const DefaultMaxSessions = 100

// sessionHeader is the Streamable HTTP session header.
const sessionHeader = "Mcp-Session-Id"

// sessionCap counts the sessions of the stateful handler per principal
// (sessionOwner: the sub, tenant and client that the session is bound to),
// refuses a new one at the cap with 429
// (recorded as http/rate_limited, reason http_429,session_limit, in
// aggregate), and releases a slot when its session closes or idles out.
//
// It also binds each session to the principal that opened it (owner):
// a request naming a session of another principal is refused with 403
// (a hijack attempt), and auditRejections is told so. The go-sdk's own
// check compares TokenInfo.UserID, the subject alone, and so served the
// same sub of another tenant or through another client in the session,
// gave it the session's SSE stream (the notifications decided for the
// owner) and let its DELETE end the session.
type sessionCap struct {
	s   *Server
	ms  *mcp.Server
	max int

	mu    sync.Mutex
	held  map[sessionOwner]int    // principal -> sessions held or being created
	owner map[string]sessionOwner // session id -> the principal that opened it
}

// sessionOwner is what binds a session to a principal: who (sub), in which
// organization (tenant), through which software (client_id). Roles,
// patients and the purpose of use are attributes of the principal that a
// renewed token may change; every request is decided on its own token's.
type sessionOwner struct {
	sub, tenant, client string
}

// ownerOf is the sessionOwner of a verified token (nil: no token, the
// zero owner).
func ownerOf(ti *auth.TokenInfo) sessionOwner {
	if ti == nil {
		return sessionOwner{}
	}
	p := principalOf(ti)
	return sessionOwner{sub: p.Sub, tenant: p.Tenant, client: p.ClientID}
}

func newSessionCap(s *Server, ms *mcp.Server) *sessionCap {
	n := s.cfg.MaxSessions
	if n == 0 {
		n = DefaultMaxSessions
	}
	return &sessionCap{s: s, ms: ms, max: n, held: map[sessionOwner]int{}, owner: map[string]sessionOwner{}}
}

// acquire takes one of who's slots. The count is per sessionOwner, as the
// binding is: counted per sub, the same sub of another tenant or through
// another client, which may not use the sessions, used up their slots.
func (c *sessionCap) acquire(who sessionOwner) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[who] >= c.max {
		return false
	}
	c.held[who]++
	return true
}

func (c *sessionCap) release(who sessionOwner, sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sessionID != "" {
		delete(c.owner, sessionID)
	}
	if c.held[who]--; c.held[who] <= 0 {
		delete(c.held, who)
	}
}

// session is the open session with the given id, nil if there is none.
func (c *sessionCap) session(id string) *mcp.ServerSession {
	for ss := range c.ms.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// handler wraps the stateful Streamable HTTP handler. A POST without a
// session id may create a session: it takes a slot first, and gives it
// back unless a session was made, in which case the slot is given back
// when that session ends.
func (c *sessionCap) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		me := ownerOf(ti)
		if sid := r.Header.Get(sessionHeader); sid != "" {
			c.mu.Lock()
			owner, ok := c.owner[sid]
			c.mu.Unlock()
			if ok && owner != me {
				if cl := callerOf(r); cl != nil {
					cl.mismatch, cl.owner = true, owner // auditRejections records it as session_mismatch
				}
				http.Error(w, "session user mismatch: this session belongs to another principal (sub, tenant or client); open your own with initialize", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r) // an unknown id: the SDK answers 404
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if req := sessionless(r); req != nil {
			// The SDK would open a session for it, answer HTTP 200 with
			// JSON-RPC code 0 ("invalid during session initialization")
			// and close it again; the revision asks for a 400 (MCP
			// 2025-11-25, Streamable HTTP, Session Management).
			const msg = "missing Mcp-Session-Id header: open a session with initialize first (protocol revisions before " + ProtocolStateless + ")"
			if !req.IsCall() {
				http.Error(w, msg, http.StatusBadRequest)
				return
			}
			answerJSONRPC(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg})
			return
		}
		if !c.acquire(me) {
			c.s.cfg.Metrics.RateLimited(ops.LimitSessions)
			id := Identity{Source: clientaddr.Of(r)}
			if ti != nil {
				id.Principal = principalOf(ti)
			}
			e := c.s.entry(context.Background(), id, ActionRateLimited)
			if err := c.s.refuseCounted(context.Background(), e, audit.OutcomeDeny, withTenant(ReasonSessionLimit, id.Principal.Tenant), nil); err != nil {
				c.s.log.Error("auditing a session-limit refusal failed", "err", err)
				http.Error(w, "audit log unavailable: request refused", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Retry-After", "60")
			http.Error(w, "too many open sessions for this principal: end one (HTTP DELETE) or retry later", http.StatusTooManyRequests)
			return
		}
		// The owner is noted when the response's header is written, before
		// the client can learn the session id: noted after the handler
		// returned, a request naming the new session could arrive first
		// and a hijack attempt be recorded without its class.
		ow := &beforeHeader{ResponseWriter: w, fn: func(h http.Header) {
			if sid := h.Get(sessionHeader); sid != "" {
				c.mu.Lock()
				c.owner[sid] = me
				c.mu.Unlock()
			}
		}}
		next.ServeHTTP(ow, r)
		sid := w.Header().Get(sessionHeader)
		ss := (*mcp.ServerSession)(nil)
		if sid != "" {
			ss = c.session(sid)
		}
		if ss == nil {
			if sid != "" {
				c.mu.Lock()
				delete(c.owner, sid)
				c.mu.Unlock()
			}
			c.release(me, "")
			return
		}
		c.mu.Lock()
		c.owner[sid] = me
		c.mu.Unlock()
		go func() {
			ss.Wait() // the client ended it, it idled out, or the server stopped
			c.release(me, sid)
		}()
	})
}

// sessionless returns the JSON-RPC request a POST without a session id
// carries if it needs a session: any single request or notification but
// initialize and ping (which the revision allows before a session, and
// health probes send). A body that is not one JSON-RPC message is left to
// the SDK, which answers it.
func sessionless(r *http.Request) *jsonrpc.Request {
	req := peekRequest(r)
	if req == nil || req.Method == "initialize" || req.Method == "ping" {
		return nil
	}
	return req
}
