package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/server"
)

// The checks before the go-sdk, sharing one memo of the body, answer every
// request as they did when each peeked and decoded the body itself (the
// plain peekBody path, server.PlainPeeks, kept as the reference): the same
// status and response body through the real handler chain, and through
// the chain up to the SDK's handlers the same handler reached, with the
// same body bytes and the same Mcp-Method and Mcp-Name headers, and the
// same method for the OAuth scope check.
func TestBodyMemoAgreesWithPlainPeeks(t *testing.T) {
	f, _, tok, url := rateLimitedHTTP(t)
	uri := f.allURIs()[0].URI
	meta25 := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + rev2025 + `"}`
	big := `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"` + uri + `","pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	// SID is replaced by the session of the run.
	corpus := []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"2025-11-25 read", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + uri + `"}}`},
		{"2025-11-25 list", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":"l","method":"resources/list"}`},
		{"2026-07-28 read", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read", "Mcp-Name": uri},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`},
		{"2026-07-28 read, Mcp-Name in Base64", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read", "Mcp-Name": "=?base64?" + base64.StdEncoding.EncodeToString([]byte(uri)) + "?="},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`},
		{"2026-07-28 read of an empty uri (emptyName rewrites it)", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read"},
			`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{` + meta2026(`,"uri":""`) + `}}`},
		{"2026-07-28 read, empty uri given twice", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read"},
			`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`","uri":""`) + `}}`},
		{"no header, 2026-07-28 _meta", nil,
			`{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{` + meta2026(``) + `}}`},
		{"no header, server/discover", nil, `{"jsonrpc":"2.0","id":5,"method":"server/discover"}`},
		{"no header, 2025-11-25 _meta", nil, `{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{` + meta25 + `}}`},
		{"2025-11-25 header and _meta", map[string]string{"Mcp-Protocol-Version": rev2025},
			`{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{` + meta25 + `}}`},
		{"2026-07-28 notification without Mcp-Method", map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta2026(`,"requestId":1`) + `}}`},
		{"2025-11-25 notification", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`},
		{"no session", map[string]string{"Mcp-Protocol-Version": rev2025}, `{"jsonrpc":"2.0","id":7,"method":"resources/list"}`},
		{"ping without session", nil, `{"jsonrpc":"2.0","id":7,"method":"ping"}`},
		{"batch", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": "SID"},
			`[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`},
		{"batch with bad params", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": "SID"},
			`[{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":5}},{"jsonrpc":"2.0","id":9,"method":"ping"}]`},
		{"batch with a member that is no message", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": "SID"},
			`[{"jsonrpc":"2.0","id":8,"method":"ping"},{"x":1}]`},
		{"batch at 2025-11-25", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`},
		{"batch of a notification of no method", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": "SID"},
			`[{"jsonrpc":"2.0","method":"notifications/nothing"}]`},
		{"empty batch", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": "SID"}, `[]`},
		{"malformed JSON", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"}, `{"jsonrpc":"2.0","id":`},
		{"JSON, not JSON-RPC", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"}, `"hello"`},
		{"empty body", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"}, ``},
		{"whitespace body", nil, " \n\t "},
		{"params given twice", nil,
			`{"jsonrpc":"2.0","id":10,"method":"resources/list","params":{` + meta2026(``) + `},"params":{}}`},
		{"Method given again in another case", nil,
			`{"jsonrpc":"2.0","id":11,"Method":"resources/list","method":"ping","params":{` + meta2026(``) + `}}`},
		{"method given twice", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":12,"method":"ping","method":"resources/list"}`},
		{"bad params", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{"uri":5}}`},
		{"inexact id", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`},
		{"over the peek limit", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"}, big},
		{"over the peek limit, no header", nil, big},
		{"at the peek limit", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": "SID"},
			`{"jsonrpc":"2.0","id":14,"method":"ping"}` + strings.Repeat(" ", 1<<20-len(`{"jsonrpc":"2.0","id":14,"method":"ping"}`))},
	}
	type seen struct {
		status  int
		answer  string
		routed  string // the SDK handler reached, its body and headers; or the answer before it
		method  string // jsonrpcMethods' result
		session bool
	}
	run := func() []seen {
		sid := rawSession(t, url, tok)
		var out []seen
		for _, c := range corpus {
			hdr := map[string]string{}
			for k, v := range c.hdr {
				hdr[k] = strings.ReplaceAll(v, "SID", sid)
			}
			st, raw := postRaw(t, url, tok, hdr, c.body)
			var s seen
			s.status, s.answer = st, stable(raw)
			sdk := func(name string) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, err := io.ReadAll(r.Body)
					s.routed = fmt.Sprintf("%s: %d bytes %x (err %v), Mcp-Method %q, Mcp-Name %q, Content-Length %d",
						name, len(b), hashOf(b), err, r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name"), r.ContentLength)
				})
			}
			rh := f.srv.RoutedHandler(sdk, func(m []string, err error) { s.method = fmt.Sprintf("%q %v", m, err) })
			req := httptest.NewRequest("POST", server.MCPPath, strings.NewReader(c.body))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			rh.ServeHTTP(rec, req)
			if s.routed == "" {
				s.routed = fmt.Sprintf("answered %d: %s", rec.Code, rec.Body.String())
			}
			out = append(out, s)
		}
		return out
	}
	memo := run()
	restore := server.PlainPeeks()
	plain := run()
	restore()
	for i, c := range corpus {
		m, p := memo[i], plain[i]
		if m.status != p.status || m.answer != p.answer {
			t.Errorf("%s: answered %d %.300s; the plain peeks answered %d %.300s", c.name, m.status, m.answer, p.status, p.answer)
		}
		if m.routed != p.routed || m.method != p.method {
			t.Errorf("%s: reached %s (method %s); with the plain peeks %s (method %s)", c.name, m.routed, m.method, p.routed, p.method)
		}
	}
	// The corpus reaches both handlers of the requests it holds (not the
	// SSE one of subscriptions/listen), the answers before them, and the
	// rewrite.
	for _, want := range []string{"stateful:", "statelessJSON:", "answered 400", "answered 200", `Mcp-Name "` + server.EmptyURIForTest(f.srv)} {
		found := false
		for _, s := range memo {
			found = found || strings.HasPrefix(s.routed, want) || strings.Contains(s.routed, want)
		}
		if !found {
			t.Errorf("no request of the corpus %s", want)
		}
	}
}

// stable is an answer with what differs from one run to the next made
// alike: audit event ids, cursors (sealed with a fresh nonce), the order
// of a batch's answers on an SSE stream.
func stable(answer []byte) string {
	a := auditEventID.ReplaceAll(answer, []byte(`"custos/audit-event":"ID"`))
	a = cursorValue.ReplaceAll(a, []byte(`"nextCursor":"CURSOR"`))
	events := strings.Split(string(a), "\n\n")
	slices.Sort(events)
	return strings.Join(events, "\n\n")
}

var (
	auditEventID = regexp.MustCompile(`"custos/audit-event":"[^"]*"`)
	cursorValue  = regexp.MustCompile(`"nextCursor":"[^"]*"`)
)

// rateLimitedHTTP is a fixture's HTTP handler with a rate limit no test
// reaches (messagesIn reads batches), served on url, with the clinician's
// token.
func rateLimitedHTTP(t *testing.T) (f *fixture, h http.Handler, tok, url string) {
	t.Helper()
	f = newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		c.RateLimit = server.RateLimit{PerSecond: 1e6, Burst: 1000}
	}})
	h, hs := f.httpHandler("clinician")
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return f, h, hs.tokens["clinician"], ts.URL + server.MCPPath
}

// hashOf is SHA-256(b).
func hashOf(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// countingBody is a request body that counts what is asked of it: the
// reads after it said io.EOF, and the bytes it gave.
type countingBody struct {
	r         io.Reader
	n         int // bytes given
	eofs      int // reads answered io.EOF
	afterDone int // reads after the first io.EOF
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.eofs > 0 {
		b.afterDone++
	}
	n, err := b.r.Read(p)
	b.n += n
	if err == io.EOF {
		b.eofs++
	}
	return n, err
}

func (b *countingBody) Close() error { return nil }

// The body of a POST to /mcp is read once, by the first check that needs
// it, and decoded at most once per kind (as the go-sdk decodes one
// message, its params' _meta, a batch), whatever the checks before the
// go-sdk (rate limit, params, routing, sessions) need of it; the original
// body is read through once, the SDK included. Each check peeked the body
// anew through the previous peek's reader and decoded it again: a
// 2025-11-25 read was read ahead three times and decoded as a message
// twice before the SDK decoded it.
func TestBodyIsReadAndDecodedOnce(t *testing.T) {
	f, h, tok, url := rateLimitedHTTP(t)
	sid := rawSession(t, url, tok)
	uri := f.allURIs()[0].URI
	for _, c := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"2025-11-25 read", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + uri + `"}}`},
		{"2026-07-28 read", map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/read", "Mcp-Name": uri},
			`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`},
		{"no header, 2026-07-28 _meta", map[string]string{"Mcp-Method": "resources/list"},
			`{"jsonrpc":"2.0","id":4,"method":"resources/list","params":{` + meta2026(``) + `}}`},
		{"batch", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": sid},
			`[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`},
		{"batch with bad params", map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": sid},
			`[{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":5}},{"jsonrpc":"2.0","id":6,"method":"ping"}]`},
		{"2026-07-28 notification", map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta2026(`,"requestId":1`) + `}}`},
		{"2025-11-25 _meta version", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":7,"method":"resources/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + rev2025 + `"}}}`},
		{"not JSON", map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, `{"jsonrpc":`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(c.body)}
			req := httptest.NewRequest("POST", server.MCPPath, nil)
			req.Body, req.ContentLength = body, int64(len(c.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			work := map[string]int{}
			restore := server.CountBodyWork(func(kind string) { work[kind]++ })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			restore()
			for kind, n := range work {
				if n > 1 {
					t.Errorf("%s done %d times for one request (%v), want at most once", kind, n, work)
				}
			}
			if work["read"] != 1 {
				t.Errorf("body read ahead %d times, want once (%v)", work["read"], work)
			}
			if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusTooManyRequests {
				t.Fatalf("status %d: the request did not reach the checks", rec.Code)
			}
			if body.n != len(c.body) || body.eofs != 1 || body.afterDone != 0 {
				t.Errorf("body read: %d bytes of %d, io.EOF %d times, %d reads after it; want the body read through once (status %d)",
					body.n, len(c.body), body.eofs, body.afterDone, rec.Code)
			}
		})
	}
}
