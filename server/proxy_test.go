package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/clientaddr"
)

// Behind a TLS-terminating load balancer every TCP peer is the balancer:
// found by probe, every audit record named the proxy and all callers
// shared one per-source limit of failed authentications. Only a trusted
// proxy's Forwarded or X-Forwarded-For names the caller; anyone else's
// headers are ignored. The test servers listen on 127.0.0.1.

func withProxies(t *testing.T, cidrs ...string) func(*server.Config) {
	p, err := clientaddr.ParseProxies(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *server.Config) { c.TrustedProxies = p }
}

// sources lists the source of every record written since before.
func sources(f *fixture, before int) []string {
	var s []string
	for _, r := range f.records()[before:] {
		s = append(s, r.Source)
	}
	return s
}

func listAs(t *testing.T, url, tok string, hdr map[string]string) int {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/list"}
	for k, v := range hdr {
		h[k] = v
	}
	status, _ := postRaw(t, url, tok, h, `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{`+meta2026("")+`}}`)
	return status
}

func allFrom(t *testing.T, what string, got []string, want func(string) bool) {
	t.Helper()
	if len(got) == 0 {
		t.Fatalf("%s: nothing recorded", what)
	}
	for _, s := range got {
		if !want(s) {
			t.Fatalf("%s: recorded sources %q", what, got)
		}
	}
}

func TestTrustedProxyNamesTheCaller(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: withProxies(t, "127.0.0.1/32", "10.0.0.0/8")})
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	is := func(want string) func(string) bool { return func(s string) bool { return s == want } }
	fromPeer := func(s string) bool { return strings.HasPrefix(s, "127.0.0.1:") }

	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want func(string) bool
	}{
		// nginx $proxy_add_x_forwarded_for behind another balancer: the
		// client's own entry (6.6.6.6) is left of the real one.
		{"X-Forwarded-For, two proxies", map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.7, 10.0.0.2"}, is("198.51.100.7")},
		{"Forwarded (RFC 7239)", map[string]string{"Forwarded": `for="[2001:db8::7]:4711";proto=https, for=10.0.0.2`}, is("[2001:db8::7]:4711")},
		{"malformed header", map[string]string{"X-Forwarded-For": "198.51.100.7, <script>"}, fromPeer},
		{"unknown", map[string]string{"Forwarded": "for=unknown"}, fromPeer},
		{"headers disagree", map[string]string{"Forwarded": "for=6.6.6.6", "X-Forwarded-For": "198.51.100.7"}, fromPeer},
	} {
		before := len(f.records())
		if status := listAs(t, hs.url, tok, tc.hdr); status != http.StatusOK {
			t.Fatalf("%s: %d", tc.name, status)
		}
		allFrom(t, tc.name, sources(f, before), tc.want)
	}
}

// With the proxy's one header chosen, a client that adds the other one
// is still recorded by the chosen header (unchosen: both disagreeing give
// the proxy's address, which is what a client hiding behind it wants).
func TestTrustedProxyHeaderChosen(t *testing.T) {
	p, err := clientaddr.ParseProxies([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := clientaddr.ParseHeader("x-forwarded-for")
	if err != nil {
		t.Fatal(err)
	}
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) { c.TrustedProxies = p.WithHeader(hdr) }})
	hs := f.serveHTTP("clinician")
	before := len(f.records())
	h := map[string]string{"Forwarded": "for=127.0.0.1", "X-Forwarded-For": "6.6.6.6, 198.51.100.7"}
	if status := listAs(t, hs.url, hs.tokens["clinician"], h); status != http.StatusOK {
		t.Fatalf("list: %d", status)
	}
	allFrom(t, "client-added Forwarded", sources(f, before), func(s string) bool { return s == "198.51.100.7" })
}

func TestUntrustedPeerCannotChooseItsSource(t *testing.T) {
	spoof := map[string]string{"X-Forwarded-For": "198.51.100.7", "Forwarded": "for=198.51.100.7"}
	fromPeer := func(s string) bool { return strings.HasPrefix(s, "127.0.0.1:") }
	for name, tune := range map[string]func(*server.Config){
		"no trusted proxies":     nil,
		"another proxy trusted":  withProxies(t, "10.0.0.0/8"),
		"IPv6 proxy trusted too": withProxies(t, "10.0.0.0/8", "::1/128"),
	} {
		t.Run(name, func(t *testing.T) {
			f := newServerFixture(t, fixtureOptions{tune: tune})
			hs := f.serveHTTP("clinician")
			before := len(f.records())
			if status := listAs(t, hs.url, hs.tokens["clinician"], spoof); status != http.StatusOK {
				t.Fatalf("list: %d", status)
			}
			allFrom(t, "spoofed headers", sources(f, before), fromPeer)
		})
	}
}

// Failed authentications are limited per caller behind the proxy, not
// per proxy: one client's bad tokens do not lock out the others.
func TestFailedAuthLimitIsPerCallerBehindAProxy(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		withProxies(t, "127.0.0.1/32")(c)
		c.Refusals = server.RefusalLimits{Window: time.Hour, PerSource: 3}
	}})
	hs := f.serveHTTP("clinician")
	bad := func(client string) int {
		return listAs(t, hs.url, "not-a-token", map[string]string{"X-Forwarded-For": client})
	}
	before := len(f.records())
	for i := range 3 {
		if s := bad("198.51.100.7"); s != http.StatusUnauthorized {
			t.Fatalf("failure %d of the first caller: %d, want 401", i+1, s)
		}
	}
	if s := bad("198.51.100.7"); s != http.StatusTooManyRequests {
		t.Fatalf("the first caller over its limit: %d, want 429", s)
	}
	if s := bad("203.0.113.9"); s != http.StatusUnauthorized {
		t.Fatalf("another caller behind the same proxy: %d, want 401 (not locked out)", s)
	}
	if s := listAs(t, hs.url, hs.tokens["clinician"], map[string]string{"X-Forwarded-For": "203.0.113.10"}); s != http.StatusOK {
		t.Fatalf("a valid caller behind the same proxy: %d", s)
	}
	var rejects []string
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionAuthReject && r.Outcome == audit.OutcomeDeny {
			rejects = append(rejects, r.Source)
		}
	}
	if strings.Join(rejects, " ") != "198.51.100.7 203.0.113.9" {
		t.Fatalf("auth/reject records from %q, want one per caller", rejects)
	}
}

// Over OAuth the source travels with the verified token to the MCP
// handler (oauth.RemoteAddrFromTokenInfo).
func TestTrustedProxyOverOAuth(t *testing.T) {
	f := newServerFixture(t, fixtureOptions{tune: withProxies(t, "127.0.0.1/32")})
	url, mint := f.oauthServer(t)
	before := len(f.records())
	if s := listAs(t, url, mint("clinician", "resources:list resources:read"), map[string]string{"Forwarded": "for=198.51.100.7;proto=https"}); s != http.StatusOK {
		t.Fatalf("list: %d", s)
	}
	allFrom(t, "oauth", sources(f, before), func(s string) bool { return s == "198.51.100.7" })
	before = len(f.records())
	if s := listAs(t, url, "not.a.jwt", map[string]string{"X-Forwarded-For": "203.0.113.9"}); s != http.StatusUnauthorized {
		t.Fatalf("bad token: %d", s)
	}
	allFrom(t, "oauth rejection", sources(f, before), func(s string) bool { return s == "203.0.113.9" })
}
