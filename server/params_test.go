package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/server"
)

// The secrets and PHI a hostile or careless client puts in params of the
// wrong type; none may come back in an error.
const (
	paramSecret = "hunter2-s3cret"
	paramName   = "Jane-Q-Doe"
)

// badParams are calls with params the go-sdk cannot decode, each carrying
// paramSecret or paramName, and the words the error must say instead.
var badParams = []struct {
	name, method, params string
	want                 []string
}{
	{"read uri a number", "resources/read", `{"uri":5,"note":"` + paramSecret + `"}`, []string{"params.uri", "must be a JSON string"}},
	{"read uri an array", "resources/read", `{"uri":["fhir://alice:` + paramSecret + `@general-hospital/x"]}`, []string{"params.uri", "must be a JSON string"}},
	{"list cursor a number", "resources/list", `{"cursor":7,"x":"` + paramSecret + `"}`, []string{"params.cursor", "must be a JSON string"}},
	{"subscribe uri an object", "resources/subscribe", `{"uri":{"u":"fhir://g/?access_token=` + paramSecret + `"}}`, []string{"params.uri", "must be a JSON string"}},
	{"completion value a number", "completion/complete", `{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":"patient","value":1},"context":{"arguments":{"patient":"` + paramName + `"}}}`, []string{"params.argument.value", "must be a JSON string"}},
	{"completion context value a number", "completion/complete", `{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":"patient","value":""},"context":{"arguments":{"` + paramName + `":1}}}`, []string{"every member of params.context.arguments must be a JSON string"}},
	{"completion context patient a number", "completion/complete", `{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":"id","value":""},"context":{"arguments":{"patient":4711,"x":"` + paramSecret + `"}}}`, []string{"params.context.arguments.patient must be a JSON string"}},
	{"completion context type an object", "completion/complete", `{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":"id","value":""},"context":{"arguments":{"type":{"` + paramName + `":1}}}}`, []string{"params.context.arguments.type must be a JSON string"}},
	{"completion argument name a number", "completion/complete", `{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":7,"value":"` + paramName + `"}}`, []string{"params.argument.name must be a JSON string"}},
	{"params an array", "resources/list", `["` + paramSecret + `"]`, []string{"invalid params of resources/list"}},
}

// checkQuiet fails unless e is a -32602 that says want and holds neither
// paramSecret nor paramName.
func checkQuiet(t *testing.T, e map[string]any, want []string) {
	t.Helper()
	if e == nil {
		t.Fatal("no error")
	}
	raw, _ := json.Marshal(e)
	if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), paramName) {
		t.Errorf("error quotes the client's params: %s", raw)
	}
	if code, _ := e["code"].(float64); code != jsonrpc.CodeInvalidParams {
		t.Errorf("code %v, want -32602: %s", e["code"], raw)
	}
	for _, w := range want {
		if !strings.Contains(fmt.Sprint(e["message"]), w) {
			t.Errorf("message %q does not say %q", e["message"], w)
		}
	}
}

// postRaw posts body as it is (post would read it as one message) and
// returns the status and the raw answer.
func postRaw(t *testing.T, url, tok string, hdr map[string]string, body string) (int, []byte) {
	t.Helper()
	st, _, raw := postHeaders(t, url, tok, hdr, body)
	return st, raw
}

// rawSession opens a 2025-11-25 session with raw requests (initialize,
// notifications/initialized) and returns its id.
func rawSession(t *testing.T, url, tok string) string {
	t.Helper()
	_, hdr, _ := post(t, url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := hdr.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize opened no session")
	}
	post(t, url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// Params of the wrong type are refused naming the member and the type it
// needs, on both revisions over HTTP, without quoting any of the params.
func TestMalformedParamsAreNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	h25 := map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)}
	for _, c := range badParams {
		t.Run(rev2025+"/"+c.name, func(t *testing.T) {
			_, _, msg := post(t, hs.url, tok, h25, `{"jsonrpc":"2.0","id":2,"method":"`+c.method+`","params":`+c.params+`}`)
			e, _ := msg["error"].(map[string]any)
			checkQuiet(t, e, c.want)
			if msg["id"] != float64(2) {
				t.Errorf("answer id %v, want 2", msg["id"])
			}
		})
	}
	for _, c := range badParams {
		if c.method == "resources/read" || c.method == "resources/subscribe" || strings.HasPrefix(c.params, "[") {
			continue // the SDK refuses these for their headers or _meta, quoting nothing
		}
		t.Run(rev2026+"/"+c.name, func(t *testing.T) {
			params := strings.Replace(c.params, "{", "{"+meta2026(",")+"", 1)
			st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026}, `{"jsonrpc":"2.0","id":3,"method":"`+c.method+`","params":`+params+`}`)
			e, _ := msg["error"].(map[string]any)
			checkQuiet(t, e, c.want)
			if st != 400 {
				t.Errorf("status %d, want 400", st)
			}
		})
	}
}

// A 2026-07-28 Mcp-Name header that differs from params.uri is refused
// without quoting either (the header may carry a URI with credentials).
func TestMcpNameMismatchIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	uri := f.allURIs()[0].URI
	body := `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`
	for _, name := range []string{"fhir://alice:" + paramSecret + "@general-hospital/x", uri + "?access_token=" + paramSecret} {
		st, _, msg := post(t, hs.url, hs.tokens["clinician"], map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Name": name}, body)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(e)
		if e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) || st != 400 {
			t.Fatalf("status %d, error %s; want 400 and %d", st, raw, mcp.CodeHeaderMismatch)
		}
		if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), uri) {
			t.Errorf("mismatch error quotes a value: %s", raw)
		}
		if !strings.Contains(fmt.Sprint(e["message"]), "Mcp-Name header does not match params.uri") {
			t.Errorf("message %q does not name the header and the member", e["message"])
		}
	}
}

// The Mcp-Name header of a read is compared with params.uri alone, as the
// go-sdk compares it: custos compared it with params.uri and params.name
// run together, so a read whose params also had a "name" member was
// refused although its header matched, and a header equal to uri+name
// passed to the SDK, whose refusal quoted the header and the uri.
func TestMcpNameIsComparedWithTheURIOnly(t *testing.T) {
	hs, uri := newFixture(t, "").serveWithAURI(t)
	read := func(name, params string) (int, map[string]any) {
		t.Helper()
		st, _, msg := post(t, hs.url, hs.tokens["clinician"], map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Name": name},
			`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{`+meta2026(","+params)+`}}`)
		return st, msg
	}
	if st, msg := read(uri, `"uri":"`+uri+`","name":"x"`); st != 200 || msg["result"] == nil {
		t.Errorf("read with a matching header and a name member: status %d, answer %v", st, msg)
	}
	secret := "?access_token=" + paramSecret
	st, msg := read(uri+secret, `"uri":"`+uri+`","name":"`+secret+`"`)
	e, _ := msg["error"].(map[string]any)
	raw, _ := json.Marshal(msg)
	if st != 400 || e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) || !strings.Contains(fmt.Sprint(e["message"]), "Mcp-Name header does not match params.uri") {
		t.Errorf("header equal to uri+name: status %d, answer %s; want 400, %d naming params.uri", st, raw, mcp.CodeHeaderMismatch)
	}
	if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), uri) {
		t.Errorf("mismatch error quotes a value: %s", raw)
	}
}

// The Mcp-Name check reads the params as the go-sdk reads them for its own
// comparison (ReadResourceParams, CallToolParams, GetPromptParams): custos
// decoded uri and name together into one struct, so a read whose params
// also had a "name" that is not a string (or a tools/call with a "uri"
// that is not) failed custos's decoding, was not checked, and reached the
// SDK, which decodes only its own member and answered "Mcp-Name header
// value '<header>' does not match body value '<uri>'", quoting both.
func TestMcpNameCheckReadsTheParamsAsTheSDKDoes(t *testing.T) {
	hs, uri := newFixture(t, "").serveWithAURI(t)
	header := "x?access_token=" + paramSecret
	for _, c := range []struct{ method, params, member string }{
		{"resources/read", `"uri":"` + uri + `","name":5`, "params.uri"},
		{"resources/read", `"uri":"` + uri + `","name":{"n":1}`, "params.uri"},
		{"tools/call", `"name":"` + uri + `","uri":5`, "params.name"},
		{"prompts/get", `"name":"` + uri + `","uri":[1]`, "params.name"},
	} {
		st, _, msg := post(t, hs.url, hs.tokens["clinician"], map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Name": header},
			`{"jsonrpc":"2.0","id":9,"method":"`+c.method+`","params":{`+meta2026(","+c.params)+`}}`)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(msg)
		if st != 400 || e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) || !strings.Contains(fmt.Sprint(e["message"]), "does not match "+c.member) {
			t.Errorf("%s {%s}: status %d, answer %s; want 400, %d naming %s", c.method, c.params, st, raw, mcp.CodeHeaderMismatch, c.member)
		}
		if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), uri) {
			t.Errorf("%s {%s}: mismatch error quotes a value: %s", c.method, c.params, raw)
		}
	}
}

// A 2026-07-28 Mcp-Name header in the revision's Base64 form
// ("=?base64?" Base64(UTF-8 value) "?=", SEP-2243), which clients must use
// for a value with non-ASCII or control characters or surrounding
// whitespace (TypeScript SDK v2, @modelcontextprotocol/client 2.4.0, does),
// names the value it decodes to. custos compared it undecoded, so a read
// of a URI with such characters was answered -32020 "header mismatch"
// instead of naming what is wrong with the URI; and once it matches, the
// go-sdk (which does not decode either) must not refuse it.
func TestBase64McpNameIsDecoded(t *testing.T) {
	f := newFixture(t, "")
	hs, uri := f.serveWithAURI(t)
	tok := hs.tokens["clinician"]
	enc := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	read := func(name, uri string) (int, map[string]any) {
		t.Helper()
		u, _ := json.Marshal(uri)
		st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Name": name},
			`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{`+meta2026(`,"uri":`+string(u))+`}}`)
		return st, msg
	}
	for _, c := range []struct {
		uri, reason string
	}{
		{uri + "\u00e9", "uri contains non-ascii characters"},
		{uri + " ", "uri contains whitespace or control characters"},
		{uri + "\t" + paramName, "uri contains whitespace or control characters"},
	} {
		before := len(f.records())
		st, msg := read(enc(c.uri), c.uri)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(msg)
		if st != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidParams) || !strings.Contains(fmt.Sprint(e["message"]), c.reason) {
			t.Errorf("read of %q named in Base64: status %d, answer %s; want 400, -32602 saying %q", c.uri, st, raw, c.reason)
		}
		if strings.Contains(string(raw), paramName) || strings.Contains(string(raw), uri) {
			t.Errorf("answer quotes the uri: %s", raw)
		}
		if recs := f.records()[before:]; len(recs) != 1 || recs[0].Reason != server.ReasonBadURI {
			t.Errorf("read of a bad uri named in Base64 audited as %+v, want one %s record", recs, server.ReasonBadURI)
		}
	}
	// A value that needs no encoding may still come encoded: it is the
	// same name, and the read is served.
	if st, msg := read(enc(uri), uri); st != 200 || msg["result"] == nil {
		t.Errorf("read named in Base64: status %d, answer %v", st, msg)
	}
	// An encoding of another value, or no valid Base64, still mismatches.
	for _, name := range []string{enc(uri + "x"), "=?base64?" + paramName + "!?=", enc(uri)[:20] + "?="} {
		st, msg := read(name, uri)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(msg)
		if st != 400 || e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) {
			t.Errorf("Mcp-Name %.30q: status %d, answer %s; want 400 and %d", name, st, raw, mcp.CodeHeaderMismatch)
		}
		if strings.Contains(string(raw), paramName) || strings.Contains(string(raw), uri) {
			t.Errorf("mismatch error quotes a value: %s", raw)
		}
	}
}

// The go-sdk checks the Mcp-Method and Mcp-Name headers of every POST
// whose MCP-Protocol-Version sorts at or after "2026-07-28" as a string,
// and its refusal quotes both values; custos checked them only under a
// header of a revision's form (ten digits and dashes). A header such as
// "2026-07-28x" given again as the _meta protocol version reached the
// stateless handler unchecked, and the SDK's answer quoted the Mcp-Name
// header and the uri, or the Mcp-Method header.
func TestStandardHeadersAreCheckedWheneverTheSDKChecksThem(t *testing.T) {
	hs, uri := newFixture(t, "").serveWithAURI(t)
	secret := "x?access_token=" + paramSecret
	for _, v := range []string{"2026-07-28x", "2027", "z"} {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"}`
		for _, c := range []struct {
			name, method, name2, body, want string
		}{
			{"Mcp-Name", "resources/read", secret,
				`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta + `,"uri":"` + uri + `"}}`, "Mcp-Name header does not match"},
			{"Mcp-Method of a call", secret, uri,
				`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{` + meta + `,"uri":"` + uri + `"}}`, "Mcp-Method header does not match"},
			{"Mcp-Method of a notification", secret, "",
				`{"jsonrpc":"2.0","method":"notifications/initialized","params":{` + meta + `}}`, "Mcp-Method header does not match"},
		} {
			hdr := map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": c.method}
			if c.name2 != "" {
				hdr["Mcp-Name"] = c.name2
			}
			st, _, msg := post(t, hs.url, hs.tokens["clinician"], hdr, c.body)
			e, _ := msg["error"].(map[string]any)
			raw, _ := json.Marshal(msg)
			if st != 400 || e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) || !strings.Contains(fmt.Sprint(e["message"]), c.want) {
				t.Errorf("version %q, differing %s: status %d, answer %s; want 400, %d saying %q", v, c.name, st, raw, mcp.CodeHeaderMismatch, c.want)
			}
			if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), uri) {
				t.Errorf("version %q, differing %s: the answer quotes a value: %s", v, c.name, raw)
			}
		}
	}
}

// A 2026-07-28 Mcp-Method header that differs from the body's method is
// refused without quoting either (the go-sdk's answer quotes both, and the
// method is whatever the client typed), on a call and on a notification.
func TestMcpMethodMismatchIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	uri := f.allURIs()[0].URI
	for _, c := range []struct{ header, body string }{
		{"resources/list", `{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{` + meta2026(`,"uri":"`+uri+`"`) + `}}`},
		{"fhir://alice:" + paramSecret + "@x", `{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{` + meta2026("") + `}}`},
		{"resources/list", `{"jsonrpc":"2.0","id":5,"method":"x-` + paramSecret + `","params":{` + meta2026("") + `}}`},
		{"notifications/initialized", `{"jsonrpc":"2.0","method":"notifications/` + paramSecret + `"}`},
	} {
		st, _, msg := post(t, hs.url, hs.tokens["clinician"], map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": c.header, "Mcp-Name": uri}, c.body)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(msg)
		if e == nil || e["code"] != float64(mcp.CodeHeaderMismatch) || st != 400 || !strings.Contains(fmt.Sprint(e["message"]), "Mcp-Method header does not match") {
			t.Errorf("header %.20q: status %d, answer %s; want 400 and %d naming Mcp-Method", c.header, st, raw, mcp.CodeHeaderMismatch)
		}
		if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), "resources/") {
			t.Errorf("mismatch error quotes a value: %s", raw)
		}
	}
}

// Over stdio too, a call with params of the wrong type is answered without
// them, after a proper initialization, and the session goes on.
func TestMalformedParamsOverStdio(t *testing.T) {
	f := newFixture(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	go f.srv.ServeStdio(ctx, st, f.identity("clinician"))
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(id int64, method, params string) *jsonrpc.Response {
		t.Helper()
		jid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(ctx, &jsonrpc.Request{ID: jid, Method: method, Params: json.RawMessage(params)}); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := msg.(*jsonrpc.Response); ok && r.ID == jid {
				return r
			}
		}
	}
	if r := call(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`); r.Error != nil {
		t.Fatal(r.Error)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for i, c := range badParams {
		r := call(int64(10+i), c.method, c.params)
		if r.Error == nil {
			t.Fatalf("%s: no error", c.name)
		}
		raw, _ := json.Marshal(r.Error)
		var e map[string]any
		json.Unmarshal(raw, &e)
		t.Run(c.name, func(t *testing.T) { checkQuiet(t, e, c.want) })
	}
	if r := call(99, "resources/templates/list", `{}`); r.Error != nil {
		t.Fatalf("session did not go on: %v", r.Error)
	}
}

// A numeric id the go-sdk would not answer unchanged (it decodes ids as
// float64 and answers their int64) is refused as an invalid request; ids it
// keeps pass.
func TestInexactRequestIDIsRefused(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	h26 := map[string]string{"Mcp-Protocol-Version": rev2026}
	list := func(id string) (int, map[string]any) {
		st, _, msg := post(t, hs.url, tok, h26, `{"jsonrpc":"2.0","id":`+id+`,"method":"resources/list","params":{`+meta2026("")+`}}`)
		return st, msg
	}
	for _, id := range []string{"1.5", "-0.25", "123456789012345678901234567890", "9007199254740993", "1e300"} {
		st, msg := list(id)
		e, _ := msg["error"].(map[string]any)
		if st != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(fmt.Sprint(e["message"]), "id must be a string or an integer") {
			t.Errorf("id %s: status %d, answered id %v error %v; want 400 and -32600 naming the id", id, st, msg["id"], e)
		}
	}
	for _, id := range []string{"7", "-7", "9007199254740991", "1.0", `"req-7"`} {
		st, msg := list(id)
		if st != 200 || msg["result"] == nil {
			t.Errorf("id %s: status %d, error %v; want a result", id, st, msg["error"])
			continue
		}
		if raw, _ := json.Marshal(msg["id"]); id != "1.0" && string(raw) != id {
			t.Errorf("id %s answered as %s", id, raw)
		}
	}
}

// A request whose id is null is refused -32600 with id null (MCP: an id is
// a string or an integer), in a session and stateless, alone and as a
// member of a batch, and nothing is decided or recorded. The go-sdk read it
// as a notification and answered a plain-text 400 `invalid request:
// missing id for "resources/list"`.
func TestNullRequestIDIsRefused(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	before := len(f.records())
	for _, c := range []struct {
		hdr  map[string]string
		body string
	}{
		{map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)}, `{"jsonrpc":"2.0","id":null,"method":"resources/list"}`},
		{map[string]string{"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/list"}, `{"jsonrpc":"2.0","id":null,"method":"resources/list","params":{` + meta2026("") + `}}`},
		{nil, `{"jsonrpc":"2.0","id":null,"method":"resources/list"}`},
	} {
		status, raw := postRaw(t, hs.url, tok, c.hdr, c.body)
		var msg map[string]any
		if err := json.Unmarshal(raw, &msg); err != nil {
			t.Errorf("headers %v: status %d, answer %q is no JSON-RPC response", c.hdr, status, raw)
			continue
		}
		e, _ := msg["error"].(map[string]any)
		id, hasID := msg["id"]
		if status != 400 || e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(fmt.Sprint(e["message"]), "id must not be null") || !hasID || id != nil {
			t.Errorf("headers %v: status %d, answer %s; want 400, -32600 naming the id, id null", c.hdr, status, raw)
		}
	}
	// In a batch (2025-03-26) the member is answered alone and the other run.
	status, raw := postRaw(t, hs.url, tok, nil, `[{"jsonrpc":"2.0","id":null,"method":"resources/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	if status != 200 || !strings.Contains(string(raw), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id must not be null`) || !strings.Contains(string(raw), `"id":2,"result"`) {
		t.Errorf("batch: status %d, answer %s", status, raw)
	}
	if n := len(f.records()) - before; n != 0 {
		t.Errorf("%d audit records, want none", n)
	}
}

// A body that is not one JSON-RPC 2.0 message (or a batch of them) is
// refused over HTTP without quoting it; the go-sdk's "malformed payload"
// answer quoted the offending input.
func TestMalformedEnvelopeIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	secretURI := "fhir://alice:" + paramSecret + "@general-hospital/x"
	bodies := []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":["` + secretURI + `"]}`, "-32600"},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{},"jsonrpc":["` + paramName + `"]}`, "-32600"},
		{`[{"jsonrpc":"2.0","id":1,"method":{"uri":"` + secretURI + `"}}]`, "-32600"},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"x":"` + paramName + `"} trailing`, "-32700"},
	}
	for _, hdr := range []map[string]string{nil, {"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)}, {"Mcp-Protocol-Version": rev2026, "Mcp-Method": "resources/list"}} {
		for _, c := range bodies {
			status, raw := postRaw(t, hs.url, tok, hdr, c.body)
			if strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), paramName) {
				t.Errorf("headers %v: answer quotes the body: %s", hdr, raw)
			}
			if strings.HasPrefix(c.body, "[") {
				// A batch: its member answered alone (2025-03-26), or the
				// batch refused by a revision that has none.
				if (hdr == nil && (status != 200 || !strings.HasPrefix(string(raw), `[{"jsonrpc":"2.0","id":null,"error":{"code":`+c.want))) ||
					(hdr != nil && (status != 400 || !strings.Contains(string(raw), "batching is not supported"))) {
					t.Errorf("headers %v, batch %.40s…: status %d, answer %s", hdr, c.body, status, raw)
				}
				continue
			}
			if status != 400 || !strings.Contains(string(raw), `"code":`+c.want) || !strings.Contains(string(raw), `"id":null`) {
				t.Errorf("headers %v, body %.40s…: status %d, answer %s; want 400, %s and id null", hdr, c.body, status, raw, c.want)
			}
		}
	}
}

// Over a transport other than custos's StdioTransport (here the go-sdk's
// own), a line that is not a JSON-RPC message ends the session (the SDK's
// transport stops reading) with ErrMalformedInput, which neither quotes the
// line nor lets the SDK log it. StdioTransport answers it and goes on
// (stdio_test.go).
func TestMalformedLineOverStdioIsNotQuoted(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, clientOut := io.Pipe()
	clientIn, out := io.Pipe()
	go io.Copy(io.Discard, clientIn)
	done := make(chan error, 1)
	go func() {
		done <- f.srv.ServeStdio(ctx, &mcp.IOTransport{Reader: in, Writer: out}, f.identity("clinician"))
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":["fhir://alice:` + paramSecret + `@general-hospital/x"]}`,
	} {
		if _, err := io.WriteString(clientOut, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the session did not end")
	}
	clientOut.Close()
	if !errors.Is(err, server.ErrMalformedInput) || strings.Contains(err.Error(), paramSecret) {
		t.Errorf("ServeStdio ended with %v, want ErrMalformedInput", err)
	}
	if strings.Contains(logs.String(), paramSecret) {
		t.Errorf("the line reached the log: %s", logs.String())
	}
}

// A call of a method the go-sdk does not know is answered -32601 without
// quoting the method name (404 on 2026-07-28, as the SDK answers it).
func TestUnknownMethodIsNotQuotedBack(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	method := "patients/" + paramName
	for _, c := range []struct {
		hdr    map[string]string
		body   string
		status int
	}{
		{map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": rawSession(t, hs.url, tok)}, `{"jsonrpc":"2.0","id":5,"method":"` + method + `","params":{}}`, 200},
		{map[string]string{"Mcp-Protocol-Version": rev2026}, `{"jsonrpc":"2.0","id":5,"method":"` + method + `","params":{` + meta2026("") + `}}`, 404},
	} {
		st, _, msg := post(t, hs.url, tok, c.hdr, c.body)
		e, _ := msg["error"].(map[string]any)
		raw, _ := json.Marshal(msg)
		if st != c.status || e == nil || e["code"] != float64(jsonrpc.CodeMethodNotFound) || msg["id"] != float64(5) {
			t.Errorf("headers %v: status %d, answer %s; want %d and -32601", c.hdr, st, raw, c.status)
		}
		if strings.Contains(string(raw), paramName) {
			t.Errorf("answer quotes the method: %s", raw)
		}
	}
}

// serveWithAURI serves f over HTTP to the clinician persona and returns
// the server and the URI of a resource the clinician may read, listed
// over 2026-07-28.
func (f *fixture) serveWithAURI(t *testing.T) (*httpServer, string) {
	t.Helper()
	hs := f.serveHTTP("clinician")
	res, err := hs.connect(t, "clinician", rev2026).ListResources(context.Background(), nil)
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("list: %v", err)
	}
	return hs, res.Resources[0].URI
}
