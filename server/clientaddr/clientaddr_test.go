package clientaddr_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server/clientaddr"
)

func mustProxies(t *testing.T, entries ...string) clientaddr.Proxies {
	t.Helper()
	p, err := clientaddr.ParseProxies(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Header shapes as nginx (X-Forwarded-For, $proxy_add_x_forwarded_for),
// HAProxy and Envoy (X-Forwarded-For, optionally Forwarded per RFC 7239
// §4 with quoted IPv6 and ports) write them.
func TestSource(t *testing.T) {
	p := mustProxies(t, "10.0.0.0/8", "192.0.2.10", "2001:db8:ffff::/48")
	for _, tc := range []struct {
		name, peer string
		h          map[string][]string
		want       string
	}{
		{"untrusted peer: headers ignored", "203.0.113.5:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.1"}}, "203.0.113.5:4000"},
		{"trusted peer, no header", "10.1.1.1:4000", nil, "10.1.1.1:4000"},
		{"one hop", "10.1.1.1:4000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"client-written entries left of the real one are ignored", "10.1.1.1:4000",
			map[string][]string{"X-Forwarded-For": {"1.2.3.4, 5.6.7.8, 198.51.100.1"}}, "198.51.100.1"},
		{"chain of proxies", "192.0.2.10:443",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1, 10.9.9.9, 10.2.2.2"}}, "198.51.100.1"},
		{"several header lines are one list", "10.1.1.1:4000",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 198.51.100.1", "10.2.2.2"}}, "198.51.100.1"},
		{"all hops trusted: the left-most", "10.1.1.1:4000",
			map[string][]string{"X-Forwarded-For": {"10.3.3.3, 10.2.2.2"}}, "10.3.3.3"},
		{"IPv6 in X-Forwarded-For", "[2001:db8:ffff::1]:443",
			map[string][]string{"X-Forwarded-For": {"2001:db8:1::7"}}, "2001:db8:1::7"},
		{"IPv4-mapped peer is trusted as its IPv4", "[::ffff:10.1.1.1]:443",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"Forwarded", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=6.6.6.6, for=198.51.100.1;proto=https;by=10.1.1.1`}}, "198.51.100.1"},
		{"Forwarded IPv6 quoted with port", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for="[2001:db8:cafe::17]:4711";proto=https, for=10.2.2.2`}}, "[2001:db8:cafe::17]:4711"},
		{"Forwarded case-insensitive parameter", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`For=198.51.100.1`}}, "198.51.100.1"},
		{"Forwarded and X-Forwarded-For agree", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=198.51.100.1`}, "X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"Forwarded with a port and X-Forwarded-For without agree: Forwarded's", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for="198.51.100.1:4711"`}, "X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1:4711"},
		{"Forwarded and X-Forwarded-For disagree: peer", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=6.6.6.6`}, "X-Forwarded-For": {"198.51.100.1"}}, "10.1.1.1:4000"},
		{"unknown before an untrusted hop: peer", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=198.51.100.1, for=unknown`}}, "10.1.1.1:4000"},
		{"unknown left of the source is never reached", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=unknown, for=198.51.100.1`}}, "198.51.100.1"},
		{"obfuscated: peer", "10.1.1.1:4000", map[string][]string{"Forwarded": {`for=_hidden`}}, "10.1.1.1:4000"},
		{"Forwarded element without for: peer", "10.1.1.1:4000", map[string][]string{"Forwarded": {`proto=https`}}, "10.1.1.1:4000"},
		{"Forwarded element with two for: peer", "10.1.1.1:4000",
			map[string][]string{"Forwarded": {`for=198.51.100.1;for=6.6.6.6`}}, "10.1.1.1:4000"},
		{"Forwarded garbage: peer", "10.1.1.1:4000", map[string][]string{"Forwarded": {`<script>`}}, "10.1.1.1:4000"},
		{"X-Forwarded-For garbage: peer", "10.1.1.1:4000",
			map[string][]string{"X-Forwarded-For": {"198.51.100.1, not-an-ip"}}, "10.1.1.1:4000"},
		{"empty X-Forwarded-For: peer", "10.1.1.1:4000", map[string][]string{"X-Forwarded-For": {""}}, "10.1.1.1:4000"},
		{"zone: peer", "10.1.1.1:4000", map[string][]string{"X-Forwarded-For": {"fe80::1%eth0"}}, "10.1.1.1:4000"},
		{"half a bracket: peer", "10.1.1.1:4000", map[string][]string{"X-Forwarded-For": {"[2001:db8::1"}}, "10.1.1.1:4000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Source(tc.peer, http.Header(tc.h)); got != tc.want {
				t.Fatalf("Source(%s, %v) = %q, want %q", tc.peer, tc.h, got, tc.want)
			}
		})
	}
	var none clientaddr.Proxies
	if got := none.Source("10.1.1.1:4000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}); got != "10.1.1.1:4000" {
		t.Fatalf("no trusted proxies: %q, want the peer", got)
	}
}

// TestSourceFromOneHeader: with the proxies' one header chosen, a client
// that sends the other cannot make its request look like the proxy's (or
// name a source of its choosing); the chosen header is read as before.
func TestSourceFromOneHeader(t *testing.T) {
	base := mustProxies(t, "10.0.0.0/8")
	const peer = "10.1.1.1:4000"
	both := http.Header{"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"198.51.100.1"}}
	for _, tc := range []struct {
		header string
		h      http.Header
		want   string
	}{
		{"", both, peer},
		{"x-forwarded-for", both, "198.51.100.1"},
		{"X-Forwarded-For", http.Header{"Forwarded": {"for=6.6.6.6"}}, peer},
		{"forwarded", both, "6.6.6.6"},
		{"Forwarded", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, peer},
		{"forwarded", http.Header{"Forwarded": {`for=6.6.6.6, for="[2001:db8::1]:443"`}}, "[2001:db8::1]:443"},
	} {
		hdr, err := clientaddr.ParseHeader(tc.header)
		if err != nil {
			t.Fatal(err)
		}
		if got := base.WithHeader(hdr).Source(peer, tc.h); got != tc.want {
			t.Errorf("header %q, %v: source %q, want %q", tc.header, tc.h, got, tc.want)
		}
	}
	// An untrusted peer is its own source whatever the choice.
	hdr, _ := clientaddr.ParseHeader("forwarded")
	if got := base.WithHeader(hdr).Source("203.0.113.5:1", both); got != "203.0.113.5:1" {
		t.Errorf("untrusted peer: %q", got)
	}
	for _, bad := range []string{"x-real-ip", "forwarded-for", "both"} {
		if _, err := clientaddr.ParseHeader(bad); err == nil || !strings.Contains(err.Error(), "want forwarded or x-forwarded-for") {
			t.Errorf("ParseHeader(%q) = %v", bad, err)
		}
	}
}

func TestParseProxies(t *testing.T) {
	p := mustProxies(t, " 10.0.0.0/8", "192.0.2.10", "2001:db8::/32", "::ffff:172.16.0.0/108")
	if got := p.Source("172.16.0.9:1", http.Header{"X-Forwarded-For": {"198.51.100.1"}}); got != "198.51.100.1" {
		t.Fatalf("IPv4-mapped prefix not applied to IPv4 peers: %q", got)
	}
	for _, bad := range []string{"", "0.0.0.0/0", "::/0", "10.0.0.1/8", "not-an-ip", "10.0.0.0/33", "fe80::1%eth0", "::ffff:0.0.0.0/80"} {
		_, err := clientaddr.ParseProxies([]string{"10.0.0.0/8", bad})
		if !errors.Is(err, clientaddr.ErrBadProxy) || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseProxies(%q) = %v, want ErrBadProxy naming it", bad, err)
		}
	}
}

func TestHandlerAndOf(t *testing.T) {
	p := mustProxies(t, "192.0.2.0/24")
	var got string
	h := clientaddr.Handler(p, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = clientaddr.Of(r) }))
	r := httptest.NewRequest(http.MethodGet, "/", nil) // RemoteAddr 192.0.2.1:1234
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got != "198.51.100.1" {
		t.Fatalf("Of behind Handler = %q", got)
	}
	if got := clientaddr.Of(r.WithContext(context.Background())); got != r.RemoteAddr {
		t.Fatalf("Of without Handler = %q, want RemoteAddr", got)
	}
}

// Whatever a trusted proxy passes on, the source is the peer or an IP
// address (with a port at most): never other header text.
func FuzzSource(f *testing.F) {
	for _, s := range []string{"198.51.100.1", `for="[2001:db8::1]:80";proto=https, for=10.0.0.1`, `for=unknown`, `for="\"x"`, "[::1]:1, 10.0.0.2", ""} {
		f.Add(s, s)
	}
	p, err := clientaddr.ParseProxies([]string{"10.0.0.0/8"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, fwd, xff string) {
		const peer = "10.0.0.9:443"
		h := http.Header{}
		if fwd != "" {
			h.Set("Forwarded", fwd)
		}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		got := p.Source(peer, h)
		if got == peer {
			return
		}
		if _, err := netip.ParseAddr(got); err == nil {
			return
		}
		if ap, err := netip.ParseAddrPort(got); err == nil && ap.Port() != 0 {
			return
		}
		t.Fatalf("Source = %q: neither the peer nor an address", got)
	})
}
