package server

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// wellFormedCalls are calls of every method of paramsOf as clients send
// them; wellFormedCall must pass each (the fast path must be taken).
var wellFormedCalls = []string{
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"fhir://general-hospital/patients/p1/Observation/o1"}}`,
	`{"jsonrpc":"2.0","id":"req-7","method":"resources/list","params":{"cursor":"abc"}}`,
	`{"jsonrpc":"2.0","id":2,"method":"resources/list"}`,
	`{"jsonrpc":"2.0","id":3,"method":"resources/templates/list","params":{}}`,
	`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"fhir://g/patients/p1"}}`,
	`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"fhir://g/patients/p1"}}`,
	`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"fhir://{tenant}/patients/{patient}/{type}/{id}"},"argument":{"name":"patient","value":"p"},"context":{"arguments":{"tenant":"g"}}}}`,
	`{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"info"}}`,
	` {"jsonrpc": "2.0", "id": -9, "method": "tools/list", "params": {"_meta": {"progressToken": 1}}} `,
	`{"method":"prompts/list","jsonrpc":"2.0","id":999999999999999}`,
	`{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"uri":"fhir://g/x"}}`,
}

// hostileBodies are bodies the plain path answers or leaves to the SDK for
// reasons of their own: the shapes of params_test.go's corpus.
var hostileBodies = []string{
	`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":5,"note":"hunter2-s3cret"}}`,
	`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":["fhir://alice:hunter2-s3cret@general-hospital/x"]}}`,
	`{"jsonrpc":"2.0","id":2,"method":"resources/list","params":["hunter2-s3cret"]}`,
	`{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"u"},"argument":{"name":"patient","value":""},"context":{"arguments":{"Jane-Q-Doe":1}}}}`,
	`{"jsonrpc":"2.0","id":1,"method":["fhir://alice:hunter2-s3cret@g/x"]}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{},"jsonrpc":["Jane-Q-Doe"]}`,
	`[{"jsonrpc":"2.0","id":1,"method":{"uri":"fhir://x"}}]`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"x":"Jane-Q-Doe"} trailing`,
	`[{"jsonrpc":"2.0","id":2,"method":"resources/templates/list"},{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"cursor":5}}]`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1,"method":"no/such/method","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources\/read","params":{"uri":"fhir://g/x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"fhir://g/x"},"error":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"fhir://g/x"},"result":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","method":"no/such","params":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a"},"params":{"uri":5}}`,
	`{"jsonrpc":"2.0","id":1,"id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping","id":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","jsonrpc":"1.0"}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fhir://g/x","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"fhir://g/x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"fhir://g/x","_meta":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"fhir://g/x","_meta":{"a":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + strings.Repeat("[", 1500) + `"}}`,
}

// idForms are ids of every JSON form, numbers of every kind among them.
var idForms = []string{`0`, `-0`, `1`, `-1`, `1.0`, `1.5`, `1e3`, `1E3`, `1e-3`, `-1e3`, `0.5`, `9007199254740991`,
	`9007199254740992`, `-9007199254740991`, `-9007199254740992`, `999999999999999`, `1000000000000000`,
	`99999999999999999999`, `1e400`, `-1e400`, `123456789012345678901234567890`, `"s"`, `""`, `"\u0000"`,
	`null`, `true`, `false`, `[]`, `{}`, `[1]`, `{"a":1}`, `01`, `+1`, `.5`, `1.`}

// testBodies are the raw-string JSON-RPC bodies of the server package's
// tests (fragments of concatenations among them).
func testBodies(t testing.TB) []string {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, `"jsonrpc"`) {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, s)
				}
			}
			return true
		})
	}
	if len(out) < 20 {
		t.Fatalf("found %d JSON-RPC bodies in the server tests, want at least 20", len(out))
	}
	return out
}

// variations are body's prefixes, single-byte changes, case changes of
// member names, duplicated members and ids of every form.
func variations(body string) []string {
	out := []string{body}
	for i := 0; i < len(body); i++ {
		out = append(out, body[:i], body[:i]+body[i+1:])
		for _, c := range []byte(` "{}[,:1.\` + "\xff") {
			if body[i] != c {
				out = append(out, body[:i]+string(c)+body[i+1:])
			}
		}
	}
	for _, m := range []string{"jsonrpc", "id", "method", "params", "uri", "name", "cursor", "result", "error"} {
		q := `"` + m + `"`
		if !strings.Contains(body, q) {
			continue
		}
		out = append(out,
			strings.Replace(body, q, strings.ToUpper(q), 1),
			strings.Replace(body, q, `"`+strings.ToUpper(m[:1])+m[1:]+`"`, 1),
			strings.Replace(body, q, `"\u00`+strconv.FormatInt(int64(m[0]), 16)+m[1:]+`"`, 1))
	}
	if i := strings.LastIndexByte(body, '}'); i > 0 {
		for _, dup := range []string{`"jsonrpc":"2.0"`, `"jsonrpc":"1.0"`, `"method":"ping"`, `"method":"no/such"`,
			`"method":5`, `"params":{}`, `"params":[]`, `"params":{"uri":5}`, `"id":null`, `"id":1.5`, `"id":"x"`,
			`"result":null`, `"error":{}`, `"error":5`} {
			out = append(out, body[:i]+","+dup+body[i:])
			if j := strings.IndexByte(body, '{'); j >= 0 {
				out = append(out, body[:j+1]+dup+","+body[j+1:])
			}
		}
	}
	if strings.Contains(body, `"id":`) {
		for _, id := range idForms {
			out = append(out, replaceID(body, id))
		}
	}
	return out
}

// replaceID replaces the value of body's first "id" member, up to the next
// ',' or '}', with id.
func replaceID(body, id string) string {
	i := strings.Index(body, `"id":`) + len(`"id":`)
	j := strings.IndexAny(body[i:], ",}")
	if j < 0 {
		return body
	}
	return body[:i] + id + body[i+j:]
}

// paramHeaders are the header sets a body is judged under: a 2025-11-25
// session's, 2026-07-28 without and with Mcp-Name.
func paramHeaders() []http.Header {
	hs := []http.Header{{"Mcp-Protocol-Version": {"2025-11-25"}}, {"Mcp-Protocol-Version": {"2026-07-28"}}}
	for _, name := range []string{"fhir://general-hospital/patients/p1/Observation/o1", "fhir://g/x", "ab"} {
		hs = append(hs, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Name": {name}})
	}
	hs = append(hs, http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"resources/read"}})
	return hs
}

// agreeWithPlainPath fails t unless the plain path leaves body to the SDK
// wherever wellFormedCall passes it, and checkParams answers body exactly
// as the plain path does. It reports wellFormedCall's verdict.
func agreeWithPlainPath(t testing.TB, h http.Header, body string) bool {
	fast := wellFormedCall(h, []byte(body))
	plain := httptest.NewRecorder()
	answered := answerMalformed(plain, h, newBodyMemo([]byte(body)))
	if fast && answered {
		t.Fatalf("wellFormedCall passed a body the plain path answers (%d %s):\nheaders %v\nbody %q", plain.Code, plain.Body, h, body)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header = h
	got := httptest.NewRecorder()
	if _, a := checkParams(got, r); a != answered || got.Code != plain.Code || !bytes.Equal(got.Body.Bytes(), plain.Body.Bytes()) {
		t.Fatalf("checkParams answered %d %s, the plain path %d %s:\nheaders %v\nbody %q", got.Code, got.Body, plain.Code, plain.Body, h, body)
	}
	return fast
}

func TestWellFormedCallAgreesWithThePlainPath(t *testing.T) {
	for _, h := range paramHeaders()[:2] {
		for _, body := range wellFormedCalls {
			if !agreeWithPlainPath(t, h, body) {
				t.Errorf("wellFormedCall refused a well-formed call (the fast path is never taken):\nheaders %v\nbody %s", h, body)
			}
		}
	}
	seeds := append(append(append([]string{}, wellFormedCalls...), hostileBodies...), testBodies(t)...)
	seen := map[string]bool{}
	passed, judged := 0, 0
	for _, seed := range seeds {
		for _, body := range variations(seed) {
			if seen[body] {
				continue
			}
			seen[body] = true
			for _, h := range paramHeaders() {
				judged++
				if agreeWithPlainPath(t, h, body) {
					passed++
				}
			}
		}
	}
	t.Logf("%d bodies under %d header sets: %d verdicts, wellFormedCall passed %d", len(seen), len(paramHeaders()), judged, passed)
}

func FuzzWellFormedCall(f *testing.F) {
	for _, b := range append(append(append([]string{}, wellFormedCalls...), hostileBodies...), testBodies(f)...) {
		for i := range paramHeaders() {
			f.Add(b, i)
		}
	}
	hs := paramHeaders()
	f.Fuzz(func(t *testing.T, body string, hi int) {
		if hi < 0 {
			hi = -hi
		}
		agreeWithPlainPath(t, hs[hi%len(hs)], body)
	})
}

// BenchmarkCheckParams is checkParams's cost on a read as the load
// harness's go-sdk client sends it: plain is the path every POST took
// before wellFormedCall, fast the path it takes now.
func BenchmarkCheckParams(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1234,"method":"resources/read","params":{"uri":"fhir://general-hospital/patients/p-0042/DocumentReference/note-0042-0003"}}`)
	h := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}, "Mcp-Session-Id": {"S3SS10N"}}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if answerMalformed(nil, h, newBodyMemo(body)) {
				b.Fatal("answered")
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !wellFormedCall(h, body) {
				b.Fatal("refused")
			}
		}
	})
}
