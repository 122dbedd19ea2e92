package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connSlots shares out the slots of http.max_connections (LimitConnections
// bounds the listener; the http.Server that NewHTTPServerWith returns
// counts its connections against the same figure through its ConnContext
// and ConnState hooks) so that connections that never carried an
// authenticated request cannot hold them all:
//
//   - a request that was not authenticated (no token, a bad one, any
//     refusal answered before the token verified; the OAuth metadata
//     document too) answered while more than three quarters of the slots
//     are in use (short) closes its connection after the answer
//     (spareSlots). Below that it keeps it: closing every refused
//     connection made each request of a kept-alive flood cost a TLS
//     handshake (boundUnreadBody);
//   - when a new connection takes the last slot, the idle connection that
//     has never carried an authenticated request and has idled longest is
//     closed, so that the next client (waiting in the listen queue) gets a
//     slot. An idle connection that carried an authenticated request keeps
//     its slot until IdleTimeout: its client is known, audited and rate
//     limited, and would pay a handshake for its next request.
//
// Connections trickling their headers (up to ReadHeaderTimeout) and
// requests in progress are never closed here.
type connSlots struct {
	max   int          // the listener's cap
	inUse atomic.Int64 // connections open (len(conns)), read without mu

	mu    sync.Mutex
	conns map[net.Conn]*connSlot
	seq   uint64 // counts transitions to idle: a smaller connSlot.idle idled earlier
}

// connSlot is what connSlots knows of one connection.
type connSlot struct {
	slots *connSlots
	conn  net.Conn
	// authenticated: the connection has carried an authenticated request
	// (noteAuthenticated); it is never closed for being idle.
	authenticated atomic.Bool
	// current: the request being served on it was authenticated. One
	// request at a time is served on an HTTP/1.1 connection, and the MCP
	// listener offers no other (TestSlotsListenerSpeaksHTTP1Only).
	current atomic.Bool
	idle    uint64 // connSlots.seq when it went idle; 0 if not idle (mu)
}

type connSlotKey struct{}

func newConnSlots(max int) *connSlots {
	return &connSlots{max: max, conns: map[net.Conn]*connSlot{}}
}

// install sets srv's ConnContext and ConnState hooks.
func (s *connSlots) install(srv *http.Server) {
	srv.ConnContext = s.connContext
	srv.ConnState = s.connState
}

func (s *connSlots) connContext(ctx context.Context, c net.Conn) context.Context {
	cs := &connSlot{slots: s, conn: c}
	s.mu.Lock()
	s.conns[c] = cs
	s.inUse.Store(int64(len(s.conns)))
	s.mu.Unlock()
	return context.WithValue(ctx, connSlotKey{}, cs)
}

func (s *connSlots) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.conns[c]
	if cs == nil {
		return
	}
	switch state {
	case http.StateNew:
		if len(s.conns) >= s.max {
			s.closeLongestIdleLocked()
		}
	case http.StateActive:
		cs.idle = 0
	case http.StateIdle:
		s.seq++
		cs.idle = s.seq
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
		s.inUse.Store(int64(len(s.conns)))
	}
}

// closeLongestIdleLocked closes the idle connection that never carried an
// authenticated request and went idle first, if there is one.
func (s *connSlots) closeLongestIdleLocked() {
	var victim *connSlot
	for _, cs := range s.conns {
		if cs.idle != 0 && !cs.authenticated.Load() && (victim == nil || cs.idle < victim.idle) {
			victim = cs
		}
	}
	if victim != nil {
		victim.idle = 0 // not chosen twice
		// Closing a TLS connection writes its close_notify (up to 5 s):
		// not in the accept loop, which runs this hook. net/http's
		// connection goroutine then sees its read fail and says StateClosed.
		go victim.conn.Close()
	}
}

// short reports whether more than three quarters of the slots are in use.
func (s *connSlots) short() bool {
	return 4*s.inUse.Load() > 3*int64(s.max)
}

func connSlotOf(ctx context.Context) *connSlot {
	cs, _ := ctx.Value(connSlotKey{}).(*connSlot)
	return cs
}

// noteAuthenticated marks the connection of an authenticated request (its
// token verified): its request keeps the connection, and the connection
// is not closed for being idle.
func noteAuthenticated(r *http.Request) {
	if cs := connSlotOf(r.Context()); cs != nil {
		cs.authenticated.Store(true)
		cs.current.Store(true)
	}
}

// spareSlots closes the connection of a request that was not authenticated
// (noteAuthenticated was not called) if, when it arrived, more than three
// quarters of the slots were in use ("Connection: close", set as its
// header is written; see connSlots). Below that it costs nothing more
// than a load.
func spareSlots(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs := connSlotOf(r.Context())
		if cs == nil {
			next.ServeHTTP(w, r) // a server not built by NewHTTPServerWith
			return
		}
		cs.current.Store(false)
		if !cs.slots.short() {
			next.ServeHTTP(w, r)
			return
		}
		bw := &beforeHeader{ResponseWriter: w, fn: func(h http.Header) {
			if !cs.current.Load() {
				h.Set("Connection", "close")
			}
		}}
		next.ServeHTTP(bw, r)
		bw.once() // a handler that wrote nothing: net/http writes the header after it returns
	})
}
