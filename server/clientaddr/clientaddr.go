package clientaddr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ErrBadProxy is returned by ParseProxies for an entry that is not an IP
// address or CIDR prefix, or that trusts every address; the message names
// the entry (configuration, never request data).
var ErrBadProxy = errors.New("clientaddr: invalid trusted proxy")

// Proxies are the address prefixes of trusted proxies and the forwarding
// header they write. The zero value trusts none: the source is always the
// TCP peer.
type Proxies struct {
	prefixes []netip.Prefix
	header   Header
}

// Header names the forwarding header the trusted proxies write.
type Header uint8

const (
	// EitherHeader reads Forwarded or X-Forwarded-For; when both are
	// present they must name the same source, or the source is the peer
	// (a client may have written one of them).
	EitherHeader Header = iota
	// ForwardedHeader reads Forwarded (RFC 7239) only: an X-Forwarded-For
	// is the client's and is ignored.
	ForwardedHeader
	// XForwardedForHeader reads X-Forwarded-For only: a Forwarded is the
	// client's and is ignored.
	XForwardedForHeader
)

// ParseHeader parses a header choice: "" (EitherHeader), "forwarded" or
// "x-forwarded-for" (in any case).
func ParseHeader(s string) (Header, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return EitherHeader, nil
	case "forwarded":
		return ForwardedHeader, nil
	case "x-forwarded-for":
		return XForwardedForHeader, nil
	}
	return EitherHeader, fmt.Errorf("clientaddr: unknown forwarding header %q: want forwarded or x-forwarded-for", s)
}

// WithHeader returns p reading only the header h writes (see Header).
func (p Proxies) WithHeader(h Header) Proxies {
	p.header = h
	return p
}

// ParseProxies parses CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or
// single addresses ("192.0.2.10", a /32 or /128). It refuses an entry that
// is neither, has a zone or host bits set (10.0.0.1/8: write 10.0.0.0/8),
// or is /0.
func ParseProxies(entries []string) (Proxies, error) {
	var p Proxies
	for _, e := range entries {
		e = strings.TrimSpace(e)
		var (
			pfx netip.Prefix
			err error
		)
		if strings.Contains(e, "/") {
			pfx, err = netip.ParsePrefix(e)
			if err == nil && pfx != pfx.Masked() {
				return Proxies{}, fmt.Errorf("%w: %q has bits set beyond its prefix length (write %s)", ErrBadProxy, e, pfx.Masked())
			}
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(e); err == nil && a.Zone() != "" {
				err = errors.New("zone")
			} else if err == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
		}
		switch {
		case err != nil:
			return Proxies{}, fmt.Errorf("%w: %q is not an IP address or CIDR prefix (e.g. 10.0.0.0/8)", ErrBadProxy, e)
		case pfx.Bits() == 0:
			return Proxies{}, fmt.Errorf("%w: %q would trust the forwarding headers of every client; name the proxies' own addresses", ErrBadProxy, e)
		}
		if pfx.Addr().Is4In6() {
			if pfx.Bits() < 96 {
				return Proxies{}, fmt.Errorf("%w: %q: an IPv4-mapped prefix must be /96 or longer", ErrBadProxy, e)
			}
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		p.prefixes = append(p.prefixes, pfx)
	}
	return p, nil
}

// trusts reports whether a is the address of a trusted proxy.
func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Source returns the source address of a request from peer (RemoteAddr,
// "host:port") with header h: peer itself unless peer is a trusted proxy
// and h names, in Forwarded or X-Forwarded-For (only the one p's Header
// names, if it names one), a hop the proxies did not write (see the
// package doc). A source from a header is an IP address,
// with ":port" (IPv6 in brackets) where Forwarded gave a numeric port.
func (p Proxies) Source(peer string, h http.Header) string {
	if len(p.prefixes) == 0 {
		return peer
	}
	ap, err := netip.ParseAddrPort(peer)
	if err != nil || !p.trusts(ap.Addr()) {
		return peer
	}
	var fwd, xff []string
	if p.header != XForwardedForHeader {
		fwd = h.Values("Forwarded")
	}
	if p.header != ForwardedHeader {
		xff = h.Values("X-Forwarded-For")
	}
	var (
		src  string
		ok   bool
		from int
	)
	if len(fwd) > 0 {
		src, ok = p.walk(forwardedFor(strings.Join(fwd, ",")))
		from++
	}
	if len(xff) > 0 {
		s, ok2 := p.walk(xForwardedFor(strings.Join(xff, ",")))
		if from > 0 && (!ok || !ok2 || addrOf(s) != addrOf(src)) {
			// A proxy writes one of them; the other came from the client,
			// unless both name the same address (Forwarded may add the
			// port, which X-Forwarded-For usually leaves out).
			return peer
		}
		if from == 0 {
			src, ok = s, ok2
		}
	}
	if !ok {
		return peer
	}
	return src
}

// addrOf is the address of a source walk returned, without its port.
func addrOf(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(s)
	return a
}

// hop is one address a proxy recorded, or !valid for one that is not an
// address ("unknown", obfuscated, malformed).
type hop struct {
	ap    netip.AddrPort // port 0 when none was given
	valid bool
}

// walk returns the right-most hop that is not a trusted proxy, or the
// left-most if all are; ok is false if there are no hops or an invalid hop
// is reached first.
func (p Proxies) walk(hops []hop) (string, bool) {
	if len(hops) == 0 {
		return "", false
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hp := hops[i]
		if !hp.valid {
			return "", false
		}
		if !p.trusts(hp.ap.Addr()) || i == 0 {
			a := hp.ap.Addr().Unmap()
			if hp.ap.Port() == 0 {
				return a.String(), true
			}
			return netip.AddrPortFrom(a, hp.ap.Port()).String(), true
		}
	}
	return "", false // not reached
}

// xForwardedFor splits an X-Forwarded-For value: addresses separated by
// commas, IPv6 bare or in brackets, optionally with a port.
func xForwardedFor(v string) []hop {
	var hops []hop
	for _, e := range strings.Split(v, ",") {
		hops = append(hops, parseNode(strings.TrimSpace(e)))
	}
	return hops
}

// forwardedFor returns the for= node of each element of a Forwarded value
// (RFC 7239 §4: elements separated by commas, pairs by semicolons, values
// tokens or quoted strings); an element without for= or one that is
// malformed is an invalid hop.
func forwardedFor(v string) []hop {
	var hops []hop
	for _, elem := range splitQuoted(v, ',') {
		h, seen := hop{}, 0
		for _, pair := range splitQuoted(elem, ';') {
			k, val, found := strings.Cut(strings.TrimSpace(pair), "=")
			if !found {
				seen = 2 // malformed pair: the element is unusable
				break
			}
			if !strings.EqualFold(k, "for") {
				continue
			}
			if seen++; seen > 1 {
				break
			}
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
				if strings.ContainsAny(val, `\"`) {
					seen = 2 // escapes never occur in an address
					break
				}
			}
			h = parseNode(val)
		}
		if seen != 1 {
			h = hop{}
		}
		hops = append(hops, h)
	}
	return hops
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var (
		parts  []string
		quoted bool
		start  int
	)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// parseNode parses an address as proxies write it: 192.0.2.1,
// 192.0.2.1:443, 2001:db8::1, [2001:db8::1], [2001:db8::1]:443. A zone,
// "unknown" or an obfuscated identifier is invalid.
func parseNode(s string) hop {
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return hop{ap: ap, valid: true}
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return hop{ap: netip.AddrPortFrom(a, 0), valid: true}
	}
	return hop{}
}

type ctxKey struct{}

// Handler computes the source of every request (Source on its RemoteAddr
// and headers) for Of, then calls next.
func Handler(p Proxies, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := p.Source(r.RemoteAddr, r.Header)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, src)))
	})
}

// Of returns the source address of r as Handler computed it, or
// r.RemoteAddr for a request that did not pass through Handler.
func Of(r *http.Request) string {
	if s, ok := r.Context().Value(ctxKey{}).(string); ok {
		return s
	}
	return r.RemoteAddr
}
