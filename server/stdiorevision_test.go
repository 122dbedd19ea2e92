package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/server"
)

// Over stdio the go-sdk judges each request's revision by its own _meta
// (SEP-2575), whatever initialize negotiated. A session opened by
// initialize at 2025-11-25 that put the 2026-07-28 _meta on a request was
// served as 2026-07-28: subscriptions/listen, which custos refuses to a
// session of an earlier revision, subscribed it (decided and audited, and
// its notifications then sent in the session's 2025-11-25 form, without
// the subscription id the listen needs), and a read of a missing resource
// was answered -32602 instead of the session's -32002. The revision
// initialize negotiated is the session's: such a request is refused,
// naming the rule, before anything is decided, and the session goes on.
func TestStdioSessionKeepsTheRevisionInitializeNegotiated(t *testing.T) {
	f := newFixture(t, "")
	uri := f.allURIs()[0].URI
	s := startStdio2025_11_25(t, f)
	before := len(f.records())
	for i, c := range []string{
		`{"jsonrpc":"2.0","id":11,"method":"subscriptions/listen","params":{` + meta2026(`,"notifications":{"resourceSubscriptions":["`+uri+`"]}`) + `}}`,
		`{"jsonrpc":"2.0","id":12,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`,
		`{"jsonrpc":"2.0","id":13,"method":"resources/list","params":{` + meta2026("") + `}}`,
	} {
		s.refusedInvalid(11+i, c, "initialize negotiated 2025-11-25")
	}
	if recs := f.records()[before:]; len(recs) != 0 {
		t.Errorf("refused requests left %d audit records, want none", len(recs))
	}
	if n := f.srv.Subscriptions(); n != 0 {
		t.Errorf("%d subscriptions held after a refused listen, want 0", n)
	}
	// The session goes on, at its revision.
	s.send(`{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("a 2025-11-25 read after the refusals answered %.300s", raw)
	}
	if recs := f.records()[before:]; len(recs) != 1 || recs[0].Action != server.ActionRead {
		t.Errorf("%d records after the read, want one read", len(recs))
	}
	s.pingAnswered(15)
}

// A stdio session whose first answered request was of 2026-07-28 (by its
// _meta, without initialize) speaks that revision: the go-sdk then served
// requests without the _meta as of an earlier revision, such as
// resources/subscribe, which 2026-07-28 removed (subscriptions/listen
// replaces it), and initialize. They are refused naming the rule; ping is
// still answered. A client whose request the SDK refused for its revision
// may still initialize an earlier one.
func TestStdioSessionOfTheStatelessRevisionKeepsIt(t *testing.T) {
	f := newFixture(t, "")
	uri := f.allURIs()[0].URI
	s := startStdio(t, f, 0)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + meta2026("") + `}}`)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("a 2026-07-28 list answered %.300s", raw)
	}
	before := len(f.records())
	for i, c := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"` + uri + `"}}`,
		stdioInit2025,
		// An earlier revision's _meta, even on ping: the session's
		// revision is named, not initialize's, which this session never
		// sent (errStdioLegacyMeta said so).
		`{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}`,
	} {
		s.send(c)
		v, raw := s.next()
		m, _ := v.(map[string]any)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(raw, "speaks protocol revision 2026-07-28") {
			t.Errorf("request %d answered %.300s; want -32600 naming the session's revision", i, raw)
		}
	}
	if recs := f.records()[before:]; len(recs) != 0 {
		t.Errorf("refused requests left %d audit records, want none", len(recs))
	}
	if n := f.srv.Subscriptions(); n != 0 {
		t.Errorf("%d subscriptions held after a refused subscribe, want 0", n)
	}
	s.pingAnswered(4)

	// A refused probe first, then initialize: a session of 2025-11-25.
	for _, probe := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{` + strings.Replace(meta2026(""), rev2026, "2099-01-01", 1) + `}}`,
	} {
		s := startStdio(t, f, 0)
		s.send(probe)
		s.next()
		s.send(stdioInit2025)
		if v, raw := s.next(); v.(map[string]any)["result"] == nil {
			t.Errorf("initialize after a probe answered %.300s", raw)
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.send(`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
		if v, raw := s.next(); v.(map[string]any)["result"] == nil {
			t.Errorf("a read after a probe and initialize answered %.300s", raw)
		}
	}
}

// A batch (a stdio session initialized at 2025-03-26) of which a message
// carries a params._meta protocol version is refused whole, as over HTTP
// (TestBatchWithMetaVersionIsToldSo): -32600, id null, naming the rule and
// quoting no version, before any of it is decided or audited. Each
// message was judged alone: the batch's read of a real resource was served
// and audited, its 2026-07-28 message was refused by sessionRevision, and
// a message with an earlier revision's _meta (or a version that is none)
// was served at the session's revision, so one client's batch came back
// half run where the same batch over HTTP ran nothing.
func TestStdioBatchWithMetaVersionIsRefusedWhole(t *testing.T) {
	f := newFixture(t, "")
	uri := f.allURIs()[0].URI
	s := startStdio2025_03_26(t, f)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	meta := func(v string) string { return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}` }
	read := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `"}}`
	before := len(f.records())
	for i, c := range []struct{ name, line string }{
		{"a request of 2026-07-28", `[` + read + `,{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{` + meta2026("") + `}}]`},
		{"its revision in _meta", `[` + read + `,{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{` + meta("2025-03-26") + `}}]`},
		{"another revision in _meta", `[{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("2024-11-05") + `}},` + read + `]`},
		{"a version that is none", `[` + read + `,{"jsonrpc":"2.0","id":2,"method":"ping","params":{` + meta("v-secret-9") + `}}]`},
		{"a notification", `[` + read + `,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,` + meta("2025-03-26") + `}}]`},
	} {
		s.send(c.line)
		v, raw := s.next()
		m, _ := v.(map[string]any)
		e, _ := m["error"].(map[string]any)
		id, hasID := m["id"]
		if e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !hasID || id != nil || e["data"] != nil {
			t.Errorf("%s: answered %.400s; want one -32600 with id null", c.name, raw)
		} else {
			for _, w := range []string{"batch", "initialize", "params._meta", "one message per line"} {
				if !strings.Contains(e["message"].(string), w) {
					t.Errorf("%s: message %q does not say %q", c.name, e["message"], w)
				}
			}
		}
		for _, q := range []string{"2025-03-26", "2024-11-05", "v-secret-9"} {
			if strings.Contains(raw, q) {
				t.Errorf("%s: answer %.400s quotes %q", c.name, raw, q)
			}
		}
		if recs := f.records()[before:]; len(recs) != 0 {
			t.Errorf("%s: %d records: the batch's read ran", c.name, len(recs))
			before = len(f.records())
		}
		s.pingAnswered(20 + i)
	}
	// A batch without the _meta is still served, each call decided and
	// audited.
	s.send(`[` + read + `,{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	if v, raw := s.next(); len(v.([]any)) != 2 || !strings.Contains(raw, `"contents"`) {
		t.Fatalf("a batch of a read and a ping answered %.300s", raw)
	}
	if recs := f.records()[before:]; len(recs) != 1 || recs[0].Action != server.ActionRead {
		t.Errorf("%d records after the plain batch, want its read", len(recs))
	}
}

// startStdio2025_11_25 starts a stdio session initialized at 2025-11-25.
func startStdio2025_11_25(t *testing.T, f *fixture) *stdioSession {
	t.Helper()
	s := startStdio(t, f, 0)
	s.send(stdioInit2025)
	if v, raw := s.next(); v.(map[string]any)["result"].(map[string]any)["protocolVersion"] != "2025-11-25" {
		t.Fatalf("initialize answered %s", raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// refusedInvalid sends line, call id, and checks that it is answered
// -32600 with a message holding want; it returns the answer.
func (s *stdioSession) refusedInvalid(id int, line, want string) string {
	s.t.Helper()
	s.send(line)
	v, raw := s.next()
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	if m["id"] != float64(id) || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(raw, want) {
		s.t.Errorf("request %d answered %.300s; want -32600 with %q", id, raw, want)
	}
	return raw
}

// A request that carries params._meta["io.modelcontextprotocol/protocolVersion"]
// of a revision before 2026-07-28 (or a version that is none) is refused
// over stdio, as over HTTP (refuseLegacyMeta) and as a batch carrying one
// is (errStdioBatchMeta): only a request of 2026-07-28 or later carries
// that _meta, and a request of an earlier revision is served at the
// revision initialize negotiated. It was served, decided and audited,
// while the go-sdk's ServerRequest.ProtocolVersion gave the _meta's
// version, not the session's; the session goes on.
func TestStdioRequestWithAnEarlierMetaVersionIsRefused(t *testing.T) {
	f := newFixture(t, "")
	uri := f.allURIs()[0].URI
	s := startStdio2025_11_25(t, f)
	meta := func(v string) string { return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}` }
	before := len(f.records())
	for i, c := range []string{
		`{"jsonrpc":"2.0","id":21,"method":"resources/list","params":{` + meta("2025-11-25") + `}}`,
		`{"jsonrpc":"2.0","id":22,"method":"resources/read","params":{` + meta("2025-03-26") + `,"uri":"` + uri + `"}}`,
		`{"jsonrpc":"2.0","id":23,"method":"resources/list","params":{` + meta("1.0") + `}}`,
		`{"jsonrpc":"2.0","id":24,"method":"ping","params":{` + meta("2025-11-25") + `}}`,
	} {
		raw := s.refusedInvalid(21+i, c, "carries no params._meta")
		if strings.Contains(raw, "1.0") || strings.Contains(raw, "2025-03-26") {
			t.Errorf("request %d: the answer quotes the _meta version: %.300s", 21+i, raw)
		}
	}
	if recs := f.records()[before:]; len(recs) != 0 {
		t.Errorf("refused requests left %d audit records, want none", len(recs))
	}
	s.send(`{"jsonrpc":"2.0","id":25,"method":"resources/list"}`)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("a list without the _meta answered %.300s", raw)
	}
	s.pingAnswered(26)
}

// A notification that carries params._meta["io.modelcontextprotocol/protocolVersion"]
// of a revision before 2026-07-28 (or, in a session initialize opened, of
// any revision) is dropped over stdio: it cannot be answered (JSON-RPC 2.0
// answers no notification), and over HTTP such a notification is refused
// with 400 before the go-sdk sees it (refuseLegacyMeta), as such a call is
// over both. The go-sdk acted on it (a second notifications/initialized
// was logged, "duplicate initialized notification"). The drop
// is logged at debug, quoting neither the version nor a method the SDK
// does not know; the session goes on.
func TestStdioNotificationWithAMetaVersionIsDropped(t *testing.T) {
	var logs syncbuf.Buffer
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	s := startStdio2025_11_25(t, f) // notifications/initialized sent
	s.pingAnswered(1)
	meta := func(v string) string { return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}` }
	for _, v := range []string{"2025-11-25", "1.0-" + paramSecret, "2026-07-28"} {
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{` + meta(v) + `}}`)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/` + paramName + `","params":{` + meta("2025-11-25") + `}}`)
	s.pingAnswered(2)
	s.send(`{"jsonrpc":"2.0","id":3,"method":"resources/list"}`)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("a list after the dropped notifications answered %.200s", raw)
	}
	if strings.Contains(logs.String(), "duplicate initialized") {
		t.Errorf("the go-sdk got a notification carrying a _meta version:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "dropped a notification"); n != 4 {
		t.Errorf("%d drops logged, want 4:\n%s", n, logs.String())
	}
	for _, q := range []string{paramSecret, paramName, "2025-11-25"} {
		if strings.Contains(logs.String(), q) {
			t.Errorf("the log quotes %q:\n%s", q, logs.String())
		}
	}
}
