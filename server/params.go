package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The go-sdk answers params it cannot decode with a -32602 whose message
// quotes the whole params object ("unmarshaling \"{\"uri\": 5, ...}\" into
// a *mcp.ReadResourceParams: ..."), and a 2026-07-28 Mcp-Name header that
// differs from the body with both values quoted. Params and that header are
// client input: a URI with userinfo or an access token, a patient's name
// typed as a completion argument. So custos decodes the params of every
// call the SDK would decode the same way first (same decoder, same target
// types) and, where the SDK would fail, answers itself with an error that
// names the member and the JSON type it needs, never a value. Requests the
// check passes reach the SDK unchanged.

// initializeParams mirrors the type the go-sdk decodes initialize's params
// into, its unexported initializeParamsV2 (mcp/protocol.go, v1.8.0):
// InitializeParams with capabilities whose roots is a *RootCapabilities.
// Its fields decode from the same JSON types as the SDK's.
type initializeParams struct {
	mcp.InitializeParams
	Capabilities *struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	} `json:"capabilities"`
}

// paramsOf maps a method the server answers to a new value of the params
// type the go-sdk decodes it into (mcp serverMethodInfos; initialize's is
// mirrored by initializeParams).
var paramsOf = map[string]func() any{
	"initialize":               func() any { return new(*initializeParams) },
	"completion/complete":      func() any { return new(*mcp.CompleteParams) },
	"ping":                     func() any { return new(*mcp.PingParams) },
	"logging/setLevel":         func() any { return new(*mcp.SetLoggingLevelParams) },
	"prompts/list":             func() any { return new(*mcp.ListPromptsParams) },
	"prompts/get":              func() any { return new(*mcp.GetPromptParams) },
	"tools/list":               func() any { return new(*mcp.ListToolsParams) },
	"tools/call":               func() any { return new(*mcp.CallToolParamsRaw) },
	"resources/list":           func() any { return new(*mcp.ListResourcesParams) },
	"resources/templates/list": func() any { return new(*mcp.ListResourceTemplatesParams) },
	"resources/read":           func() any { return new(*mcp.ReadResourceParams) },
	"resources/subscribe":      func() any { return new(*mcp.SubscribeParams) },
	"resources/unsubscribe":    func() any { return new(*mcp.UnsubscribeParams) },
	"subscriptions/listen":     func() any { return new(*mcp.SubscriptionsListenParams) },
	"server/discover":          func() any { return new(*mcp.DiscoverParams) },
}

// errUnknownMethod answers a call of a method the go-sdk does not know
// (its own answer quotes the method name).
var errUnknownMethod = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
	Message: "method not found: this server answers initialize, ping, resources/list, resources/read, resources/templates/list, resources/subscribe, resources/unsubscribe, completion/complete and (2026-07-28) server/discover and subscriptions/listen"}

// paramsError returns the -32602 to answer for a call of method whose
// params the go-sdk could not decode, errUnknownMethod for a method it does
// not know, or nil. The message names the method, the member by its
// JSON path in the params type (never a key the client chose) and the JSON
// type that member needs; it never holds any part of the params.
func paramsError(method string, params []byte) *jsonrpc.Error {
	newParams, ok := paramsOf[method]
	switch {
	case !ok && !strings.HasPrefix(method, "notifications/"):
		return errUnknownMethod // a notification sent as a call: the SDK names that
	case !ok || len(params) == 0:
		return nil
	}
	v := newParams()
	err := parseExact(params, v)
	if err == nil {
		return nil
	}
	msg := "invalid params of " + method + ": "
	var te *segjson.UnmarshalTypeError
	if errors.As(err, &te) {
		path := knownPath(reflect.TypeOf(v).Elem().Elem(), te.Field)
		what := "params"
		if path != "" {
			what = "params." + path
		}
		if path != te.Field {
			if m := mapMember(reflect.TypeOf(v).Elem().Elem(), path, te); m != "" {
				return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + m}
			}
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + what + " has the wrong JSON type"}
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + what + " must be " + jsonKind(te.Type)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + "params are not a JSON object of the form the method takes"}
}

// knownPath is the longest prefix of the dotted field path that names JSON
// members of t's struct fields: a map key (client input) and what follows
// it are cut.
func knownPath(t reflect.Type, field string) string {
	if field == "" {
		return ""
	}
	var kept []string
	for _, seg := range strings.Split(field, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			break
		}
		f, ok := jsonField(t, seg)
		if !ok {
			break
		}
		kept = append(kept, seg)
		t = f.Type
	}
	return strings.Join(kept, ".")
}

// mapMember says what is wrong with a member of a map of scalars at path
// (a struct field path of t, knownPath's) whose value has the wrong JSON
// type (te): "params.PATH.KEY must be KIND" when the key is a variable of
// the server's templates (the names completion/complete's
// context.arguments take), "every member of params.PATH must be KIND" for
// any other key (client input, never repeated), or "" when the error is
// not of such a member. A completion whose context named a patient with a
// number was told only that params.context.arguments had the wrong JSON
// type (TestMalformedParamsAreNotQuotedBack, TestMalformedParamsOverStdio).
func mapMember(t reflect.Type, path string, te *segjson.UnmarshalTypeError) string {
	for _, seg := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		f, ok := jsonField(t, seg)
		if !ok {
			return ""
		}
		t = f.Type
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	key, ok := strings.CutPrefix(te.Field, path+".")
	if t.Kind() != reflect.Map || !ok || strings.Contains(key, ".") || t.Elem() != te.Type {
		return ""
	}
	if templateVariables()[key] {
		return "params." + path + "." + key + " must be " + jsonKind(te.Type)
	}
	return "every member of params." + path + " must be " + jsonKind(te.Type)
}

// templateVariables are the names of the variables of the server's
// templates.
func templateVariables() map[string]bool {
	vars := map[string]bool{}
	for _, t := range allTemplates() {
		for _, tok := range parseTemplate(t.URITemplate) {
			if tok.name != "" {
				vars[tok.name] = true
			}
		}
	}
	return vars
}

// jsonField finds the field of struct type t whose JSON member name is name:
// a field of t itself first, then one promoted from an embedded struct
// without a JSON name (as encoding/json's shadowing rules have it).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	var embedded []reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, f.Type)
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	for _, e := range embedded {
		if f, ok := jsonField(e, name); ok {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "a JSON boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a JSON number"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "of another JSON type"
}

// nameMismatch returns the -32020 to answer for a 2026-07-28 call whose
// Mcp-Name header differs from the name in its params (the go-sdk's own
// answer quotes both), or nil. Only the methods the SDK checks (its
// extractName) are checked, and only when both values are known.
func nameMismatch(h http.Header, method string, params []byte) *jsonrpc.Error {
	if !sdkChecksStandardHeaders(h) {
		return nil
	}
	header := h.Get("Mcp-Name")
	if header == "" {
		return nil
	}
	member, body, ok := nameInBody(method, params)
	if !ok {
		return nil // the SDK cannot read it either, and then quotes only the method
	}
	if !nameHeaderIs(header, body) {
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "header mismatch: the Mcp-Name header does not match params." + member}
	}
	return nil
}

// nameInBody is the params member the go-sdk compares with an Mcp-Name
// header (its extractName, v1.8.0: uri of resources/read, name of
// tools/call and prompts/get) and its value, decoded into the same params
// types the SDK decodes them into; ok is false for another method or
// params the SDK cannot decode so (it then answers naming the method
// only). One struct with both members failed on a read whose "name" was
// not a string, skipped the check, and let the SDK quote the header and
// the uri (TestMcpNameCheckReadsTheParamsAsTheSDKDoes); uri and name run
// together refused a matching read (TestMcpNameIsComparedWithTheURIOnly).
func nameInBody(method string, params []byte) (member, value string, ok bool) {
	switch method {
	case "resources/read":
		var p mcp.ReadResourceParams
		if parseExact(params, &p) == nil {
			return "uri", p.URI, true
		}
	case "tools/call":
		var p mcp.CallToolParams
		if parseExact(params, &p) == nil {
			return "name", p.Name, true
		}
	case "prompts/get":
		var p mcp.GetPromptParams
		if parseExact(params, &p) == nil {
			return "name", p.Name, true
		}
	}
	return "", "", false
}

// Markers of the Base64 form of an Mcp-Name header value (SEP-2243,
// "Value Encoding"): "=?base64?" || Base64(UTF-8 value) || "?=", in the
// standard alphabet with padding. Clients must send a value with non-ASCII
// or control characters, or with leading or trailing whitespace, in this
// form (TypeScript SDK v2 does), and a plain value that looks like it.
const (
	nameB64Prefix = "=?base64?"
	nameB64Suffix = "?="
)

// decodeNameHeader is the value an Mcp-Name header names: its Base64 form
// decoded, or the header as it is. ok is false for the markers around
// something that is not Base64.
func decodeNameHeader(header string) (value string, ok bool) {
	enc, found := strings.CutPrefix(header, nameB64Prefix)
	if found {
		enc, found = strings.CutSuffix(enc, nameB64Suffix)
	}
	if !found {
		return header, true
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// nameHeaderIs reports whether an Mcp-Name header names body, as sent or
// in its Base64 form. The specification has servers decode the header
// before comparing; custos compared it as sent, so a read of a URI with a
// non-ASCII character, named in Base64 as the revision demands, was
// answered -32020 instead of naming what is wrong with the URI
// (TestBase64McpNameIsDecoded).
func nameHeaderIs(header, body string) bool {
	v, ok := decodeNameHeader(header)
	return ok && v == body
}

// plainNameHeader replaces a 2026-07-28 Mcp-Name header in Base64 form by
// the value it names, for the go-sdk after checkParams: v1.8.0 compares
// the header as sent with the body, and would refuse a Base64 name that
// matches, quoting both.
func plainNameHeader(r *http.Request) {
	h := r.Header.Get("Mcp-Name")
	if v, ok := decodeNameHeader(h); ok && v != h {
		r.Header.Set("Mcp-Name", v)
	}
}

// sdkChecksStandardHeaders reports whether the go-sdk compares the
// Mcp-Method and Mcp-Name headers of a POST with h with its body (its
// validateMcpHeaders, v1.8.0): whenever MCP-Protocol-Version sorts at or
// after 2026-07-28 as a string, of a revision's form or not ("2026-07-28x",
// "z"). Checked only under a header of a revision's form (statelessHeader),
// such a header given again as the _meta version reached the SDK
// unchecked, and its refusal quoted both values
// (TestStandardHeadersAreCheckedWheneverTheSDKChecksThem).
func sdkChecksStandardHeaders(h http.Header) bool {
	return h.Get("Mcp-Protocol-Version") >= ProtocolStateless
}

// methodMismatch returns the -32020 to answer for a 2026-07-28 request
// whose Mcp-Method header differs from its method (the go-sdk's own answer
// quotes both: the header, and a method name the client chose), or nil. A
// missing header is left to the SDK, whose answer quotes nothing.
func methodMismatch(h http.Header, method string) *jsonrpc.Error {
	if !sdkChecksStandardHeaders(h) {
		return nil
	}
	if header := h.Get("Mcp-Method"); header != "" && header != method {
		return errMethodMismatch
	}
	return nil
}

// versionMismatch returns the -32020 to answer for a request whose
// MCP-Protocol-Version header and params._meta protocol version (meta,
// the request's _meta) are both given and differ, one of them not of a
// revision's form (revisionForm), or nil. The go-sdk answers the same code
// but quotes both values, and the _meta one may be any string the client
// chose (the header is of a revision's form by then: refuseVersionHeader);
// a mix-up of two revisions is left to it.
func versionMismatch(h http.Header, meta map[string]any) *jsonrpc.Error {
	header := h.Get("Mcp-Protocol-Version")
	body, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	if header == "" || body == "" || header == body || (revisionForm(header) && revisionForm(body)) {
		return nil // the SDK quotes nothing, or two revisions (ten digits and dashes each)
	}
	return errVersionMismatch
}

var errVersionMismatch = &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
	Message: `header mismatch: the Mcp-Protocol-Version header does not match params._meta["io.modelcontextprotocol/protocolVersion"]`}

// metaOf is the _meta object of params, nil if there is none or params
// are not an object of the form the SDK decodes (paramsError judges those).
func metaOf(params []byte) map[string]any {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if len(params) == 0 || parseExact(params, &p) != nil {
		return nil
	}
	return p.Meta
}

// knownNotifications are the notifications the go-sdk server accepts from
// a client (mcp serverMethodInfos, v1.8.0).
var knownNotifications = map[string]bool{
	"notifications/initialized":        true,
	"notifications/cancelled":          true,
	"notifications/progress":           true,
	"notifications/roots/list_changed": true,
}

// errUnknownNotification answers a notification of a method the go-sdk
// does not know (its own answer, `JSON RPC not handled: "<method>"
// unsupported`, quotes the method name), with HTTP 400 as the SDK's.
var errUnknownNotification = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
	Message: "method not found: this server accepts the notifications notifications/initialized, notifications/cancelled, notifications/progress and notifications/roots/list_changed"}

var errMethodMismatch = &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "header mismatch: the Mcp-Method header does not match the method of the body"}

// checkParams answers an HTTP POST the go-sdk would answer with an error
// quoting client input (envelopeError, methodMismatch, exactID,
// paramsError, nameMismatch;
// a batch: checkBatch) and reports whether it did; otherwise r's body is
// left readable in full for the SDK. A body over maxBody, a notification
// or a response is left to the SDK. A well-formed call is passed by
// wellFormedCall, one parse of its envelope and one of its params; every
// other body takes the plain path, answerMalformed.
//
// A batch of which checkBatch refused members but not all is passed on
// with the other members alone (setBody), and w is then a batchAnswers
// that merges the refused members' answers into the SDK's: the caller
// answers through it and calls its finish.
func checkParams(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
	m := peekMessage(r)
	if m == nil {
		return w, false
	}
	if wellFormedCall(r.Header, m.b) {
		return w, false
	}
	if answerMalformed(w, r.Header, m) {
		return w, true
	}
	if t := bytes.TrimLeft(m.b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return w, false
	}
	plan := m.plan()
	if plan == nil || plan.whole() {
		return w, false
	}
	setBatch(r, m, plan)
	if len(plan.answers) == 0 {
		return w, false
	}
	return &batchAnswers{ResponseWriter: w, answers: plan.answers}, false
}

// answerMalformed is checkParams's plain path: it answers body m.b, if
// the go-sdk would answer it with an error quoting client input, and
// reports whether it did. wellFormedCall passes only bodies this path
// leaves to the SDK (TestWellFormedCallAgreesWithThePlainPath).
func answerMalformed(w http.ResponseWriter, h http.Header, m *bodyMemo) bool {
	// The body is decoded once per kind (m): the envelope check, the
	// checks below and the routing after checkParams share the decoding.
	b := m.b
	var msg jsonrpc.Message
	var err error
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' && segjson.Valid(b) {
		if msg, err = m.message(); err != nil {
			answerJSONRPC(w, http.StatusBadRequest, jsonrpc.ID{}, errNotJSONRPC)
			return true
		}
	} else {
		if jerr := envelopeError(m); jerr != nil {
			answerJSONRPC(w, http.StatusBadRequest, jsonrpc.ID{}, jerr)
			return true
		}
		if msg, err = m.message(); err != nil {
			if refuseBatch(w, h, b) {
				return true
			}
			return checkBatch(w, h, m)
		}
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	if jerr := methodMismatch(h, req.Method); jerr != nil {
		answerJSONRPC(w, http.StatusBadRequest, req.ID, jerr) // a notification's id: null
		return true
	}
	if !req.IsCall() && nullID(b) {
		answerJSONRPC(w, http.StatusBadRequest, jsonrpc.ID{}, errNullID)
		return true
	}
	if !req.IsCall() {
		// The SDK refuses an unknown method before it compares versions.
		if _, known := paramsOf[req.Method]; !known && !knownNotifications[req.Method] {
			answerJSONRPC(w, http.StatusBadRequest, req.ID, errUnknownNotification) // id: null
			return true
		}
		if jerr := versionMismatch(h, m.metaOf()); jerr != nil {
			answerJSONRPC(w, http.StatusBadRequest, req.ID, jerr)
			return true
		}
		return false
	}
	if !exactID(b) {
		answerJSONRPC(w, http.StatusBadRequest, jsonrpc.ID{}, errInexactID)
		return true
	}
	jerr := paramsError(req.Method, req.Params)
	status := http.StatusOK
	switch {
	case statelessHeader(h) && jerr == errUnknownMethod:
		status = http.StatusNotFound // as the SDK answers a stateless request for an unknown method
	case statelessHeader(h):
		status = http.StatusBadRequest // as the SDK answers a stateless request it refuses
	}
	if jerr != errUnknownMethod {
		// The SDK compares versions before it decodes the params.
		if v := versionMismatch(h, m.metaOf()); v != nil {
			jerr, status = v, http.StatusBadRequest
		}
	}
	if jerr == nil {
		if jerr = nameMismatch(h, req.Method, req.Params); jerr == nil {
			return false
		}
		status = http.StatusBadRequest
	}
	answerJSONRPC(w, status, req.ID, jerr)
	return true
}

// callEnvelope is the envelope of one JSON-RPC call as wellFormedCall
// reads it: the members the go-sdk's wireDecode has, each as raw JSON but
// the version tag and the id, decoded as the SDK decodes them (an id as
// any: of two "id" members, the SDK refuses a first it cannot decode so,
// such as 1e400, even though the second is the one kept).
type callEnvelope struct {
	VersionTag string             `json:"jsonrpc"`
	Method     segjson.RawMessage `json:"method"`
	Params     segjson.RawMessage `json:"params"`
	ID         any                `json:"id"`
	Result     segjson.RawMessage `json:"result"`
	Error      segjson.RawMessage `json:"error"`
}

// wellFormedCall reports whether body is one JSON-RPC call that the plain
// path (answerMalformed) leaves to the go-sdk, judged with one parse of
// the envelope and one of the params: a JSON object with "jsonrpc": "2.0",
// a method of paramsOf written without escapes, an id that is a string or
// an integer the SDK gives back unchanged, no "result" or "error",
// params absent or decoding into the method's params type, and, on a
// 2026-07-28 request, an Mcp-Name header that matches. False is no
// verdict: the plain path judges the body.
func wellFormedCall(h http.Header, body []byte) bool {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !segjson.Valid(body) {
		return false
	}
	// The SDK refuses a message nested over 1000 deep; one with at most
	// 1000 opening brackets (counted inside strings too) is not.
	if len(body) > 1000 && bytes.Count(body, []byte{'{'})+bytes.Count(body, []byte{'['}) > 1000 {
		return false
	}
	var m callEnvelope
	if parseExact(body, &m) != nil || m.VersionTag != "2.0" || len(m.Result) != 0 || len(m.Error) != 0 ||
		!integerOrStringID(m.ID) || len(m.Method) < 2 || m.Method[0] != '"' ||
		bytes.IndexByte(m.Method, '\\') >= 0 {
		return false
	}
	method := m.Method[1 : len(m.Method)-1]
	newParams, ok := paramsOf[string(method)]
	if !ok {
		return false
	}
	var meta map[string]any
	if len(m.Params) != 0 {
		v := newParams()
		if parseExact(m.Params, v) != nil {
			return false
		}
		if p, ok := reflect.ValueOf(v).Elem().Interface().(mcp.Params); ok && !reflect.ValueOf(p).IsNil() {
			meta = p.GetMeta()
		}
	}
	return methodMismatch(h, string(method)) == nil && nameMismatch(h, string(method), m.Params) == nil &&
		versionMismatch(h, meta) == nil
}

// integerOrStringID reports whether id, decoded as the go-sdk decodes it,
// is a string or an integer of at most 2^53-1 in magnitude: an id the SDK
// gives back unchanged (exactID).
func integerOrStringID(id any) bool {
	switch id := id.(type) {
	case string:
		return true
	case float64:
		return id == math.Trunc(id) && math.Abs(id) <= maxExactID
	}
	return false
}

// nullID reports whether the JSON-RPC message in body has an id that is
// null. The go-sdk reads such a request as a notification: over HTTP it
// answered one of a request method with a plain-text 400 ("missing id"),
// over stdio it dropped it unanswered, and it ran a notification so.
func nullID(body []byte) bool {
	var m struct {
		ID segjson.RawMessage `json:"id"`
	}
	return parseExact(body, &m) == nil && string(m.ID) == "null"
}

// errNullID answers a message whose id is null (nullID): MCP's requests
// have a string or integer id and its notifications none; JSON-RPC 2.0
// answers an invalid request -32600 with id null. Nothing is decided or
// recorded (TestNullRequestIDIsRefused, TestStdioAnswersMalformedLinesAndGoesOn).
var errNullID = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "invalid request: id must not be null (a request's id is a string or an integer, and a notification has none)"}

// errInexactID answers a call whose id exactID refuses.
var errInexactID = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
	Message: "invalid request: id must be a string or an integer from -(2^53-1) to 2^53-1 (this one would not come back unchanged)"}

// checkBatch is checkParams for a batch (protocol revision 2025-03-26;
// later ones refuse batches, which the SDK answers): a batch one of whose
// messages carries a _meta protocol version is refused whole
// (errBatchMeta). Otherwise the batch is judged member by member
// (planBatch), and answered here only if no member is left for the SDK: an
// array of the refused members' answers (HTTP 200), or nothing at all
// (202) if those were only notifications of methods the SDK does not know.
// A batch of which members are left is answered by the SDK, with the
// refused members' answers merged in (checkParams, batchAnswers).
func checkBatch(w http.ResponseWriter, h http.Header, m *bodyMemo) bool {
	if v := h.Get("Mcp-Protocol-Version"); (v == "" || slices.Contains(mcp.SupportedProtocolVersions(), v)) && batchMetaVersion(m) {
		answerJSONRPC(w, http.StatusBadRequest, jsonrpc.ID{}, errBatchMeta)
		return true
	}
	plan := m.plan()
	switch {
	case plan == nil || len(plan.pass) > 0:
		return false
	case len(plan.answers) == 0:
		w.WriteHeader(http.StatusAccepted) // as the SDK answers a batch without calls
	default:
		writeJSON(w, http.StatusOK, plan.answers)
	}
	return true
}

// batchMetaVersion reports whether a message of batch m carries
// params._meta["io.modelcontextprotocol/protocolVersion"] as the go-sdk
// reads it (metaOf: a non-empty string). The SDK answered such a batch,
// whatever the header and the version, -32022 "protocol version
// \"2025-03-26\" is not supported by this server", of a revision the
// server supports, to one of the batch's ids
// (TestBatchWithMetaVersionIsToldSo); refuseLegacyMeta answers one such
// request alone. Over stdio judgeLine refuses such a batch whole too
// (errStdioBatchMeta).
func batchMetaVersion(m *bodyMemo) bool {
	_, items, err := m.batch()
	if err != nil {
		return false
	}
	for _, msg := range items {
		if req, ok := msg.(*jsonrpc.Request); ok {
			if v, _ := metaOf(req.Params)[mcp.MetaKeyProtocolVersion].(string); v != "" {
				return true
			}
		}
	}
	return false
}

// errBatchMeta answers a batch of which a message carries a _meta
// protocol version (batchMetaVersion), whole: none of it is run.
var errBatchMeta = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: a batch (protocol revisions before ` + firstBatchless +
	`) is served in the session initialize opened (Mcp-Session-Id header) and its messages carry no params._meta["` + mcp.MetaKeyProtocolVersion +
	`"]; only a request of ` + ProtocolStateless + ` or later carries it, one message per POST, with an MCP-Protocol-Version header of the same revision`}

// firstBatchless is the first protocol revision without JSON-RPC batches.
const firstBatchless = "2025-06-18"

// refuseBatch answers 400 to a batch b (its messages well formed) whose
// MCP-Protocol-Version is 2025-06-18 or later, as the go-sdk does after
// reading the messages, but without repeating the header: the SDK's answer
// ends "(request version: <header>)", and a header from 2026-07-28 on
// reaches it whatever follows the date
// (TestBatchRefusalDoesNotQuoteTheVersionHeader). A header that names no
// supported revision is what is wrong with such a batch: one sorting
// before 2026-07-28 ("2025-07-01") is left to the SDK, which answers that
// the version is unsupported, quoting nothing; a later one ("2026-07-28x",
// "zzz") is answered so here, since the SDK would quote it. Both were
// told that batching is not supported in the revision the header names
// (TestBatchUnderAnUnsupportedVersionIsToldSo).
func refuseBatch(w http.ResponseWriter, h http.Header, b []byte) bool {
	v := h.Get("Mcp-Protocol-Version")
	if v < firstBatchless {
		return false
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return false
	}
	if !slices.Contains(mcp.SupportedProtocolVersions(), v) {
		if v < ProtocolStateless {
			return false
		}
		answerUnsupportedVersion(w)
		return true
	}
	http.Error(w, "JSON-RPC batching is not supported in protocol revision "+firstBatchless+" and later, which the MCP-Protocol-Version header names (the value is not repeated): send one message per request", http.StatusBadRequest)
	return true
}

// batchPlan is a batch (protocol revision 2025-03-26) judged member by
// member, as JSON-RPC 2.0 ("Batch") has it: a member that is no valid
// request is answered alone, {"jsonrpc": "2.0", "error": {"code": -32600,
// ...}, "id": null}, and the batch's other members are still processed.
// The go-sdk refused the whole batch at its first such member (HTTP 400
// "malformed payload: ..." quoting it; over stdio the session ended), and
// custos, in front of it, refused it whole with one -32600
// (TestBatchMembersAreJudgedOneByOne, TestStdioBatchMembersAreJudgedOneByOne).
// Each member is one of:
//   - no JSON-RPC 2.0 message (1, {"foo": "boo"}, "jsonrpc": "1.0", an id
//     that is an object, an array or a boolean): errNotJSONRPC, id null;
//   - a call whose id the SDK would not give back unchanged (exactID):
//     errInexactID, id null; a message whose id is null: errNullID, id
//     null;
//   - a call with the id of an earlier call of the batch: errIDTwice, id
//     null (its own would make the two answers one); the earlier call is
//     run. The SDK ran the first and dropped the other unanswered over
//     HTTP, and ended the session over stdio;
//   - a call whose params the SDK could not decode, or of a method it does
//     not know (paramsError): that error, with the call's id;
//   - a notification of a method the SDK does not know: dropped, with no
//     answer (JSON-RPC 2.0 answers no notification; the SDK refused the
//     whole batch quoting the method);
//   - else (a call, a notification, a response) it is passed to the SDK,
//     and a call is decided and audited as one sent alone.
//
// Nothing is decided, audited or served for a refused member, as for the
// same message sent alone.
type batchPlan struct {
	pass    []segjson.RawMessage // the members the SDK gets, in their order
	items   []jsonrpc.Message    // pass decoded
	answers []errorResponse      // the answers to the refused members, in their order
	n       int                  // the members of the batch
}

// plan is planBatch of the memo's batch, made at most once; nil if b is no
// JSON array.
func (m *bodyMemo) plan() *batchPlan {
	if !m.planDone {
		m.planDone = true
		raws, items, err := m.batch()
		if err == nil {
			m.planned = planBatch(raws, items)
		}
	}
	return m.planned
}

// planBatch judges batch raws (decoded as items, bodyMemo.batch).
func planBatch(raws []segjson.RawMessage, items []jsonrpc.Message) *batchPlan {
	p := &batchPlan{n: len(raws)}
	ids := map[jsonrpc.ID]bool{}
	refuse := func(id any, jerr *jsonrpc.Error) { p.answers = append(p.answers, errorResponse{"2.0", id, jerr}) }
	for i, msg := range items {
		req, isReq := msg.(*jsonrpc.Request)
		switch {
		case msg == nil:
			refuse(nil, errNotJSONRPC)
			continue
		case !isReq:
		case !req.IsCall() && nullID(raws[i]):
			refuse(nil, errNullID)
			continue
		case !req.IsCall():
			if _, known := paramsOf[req.Method]; !known && !knownNotifications[req.Method] {
				continue
			}
		case !exactID(raws[i]):
			refuse(nil, errInexactID)
			continue
		case ids[req.ID]:
			refuse(nil, errIDTwice)
			continue
		default:
			ids[req.ID] = true
			if jerr := paramsError(req.Method, req.Params); jerr != nil {
				refuse(req.ID.Raw(), jerr)
				continue
			}
		}
		p.pass = append(p.pass, raws[i])
		p.items = append(p.items, msg)
	}
	return p
}

// whole reports whether the plan passes every member of the batch.
func (p *batchPlan) whole() bool { return len(p.pass) == p.n }

// body is the batch of the members passed, as the SDK reads it.
func (p *batchPlan) body() []byte {
	return append(append([]byte{'['}, bytes.Join(trimmed(p.pass), []byte{','})...), ']')
}

func trimmed(raws []segjson.RawMessage) [][]byte {
	out := make([][]byte, len(raws))
	for i, raw := range raws {
		out[i] = bytes.Trim(raw, " \t\r\n")
	}
	return out
}

// errIDTwice answers a call of a batch with the id of an earlier call of
// the batch (planBatch).
var errIDTwice = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: an earlier call of this batch has the same id (this one was not run)"}

// errorResponse is a JSON-RPC 2.0 error response; a nil ID is written as
// null (the request's id could not be read), as JSON-RPC 2.0 asks.
type errorResponse struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      any            `json:"id"`
	Error   *jsonrpc.Error `json:"error"`
}

// answerJSONRPC writes one JSON-RPC error response as application/json.
func answerJSONRPC(w http.ResponseWriter, status int, id jsonrpc.ID, jerr *jsonrpc.Error) {
	writeJSON(w, status, errorResponse{"2.0", id.Raw(), jerr})
}

// writeJSON writes v as an application/json response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	out, err := segjson.Marshal(v)
	if err != nil {
		http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(out)
}

// envelopeError returns the error to answer for a body that is not one
// JSON-RPC 2.0 message or a batch of them, or nil. The go-sdk's own answer
// ("malformed payload: ...") quotes the offending input.
func envelopeError(m *bodyMemo) *jsonrpc.Error {
	if !segjson.Valid(m.b) {
		return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the body is not one valid JSON value"}
	}
	if t := bytes.TrimLeft(m.b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		// Its members are judged one by one (planBatch).
		if raws, _, err := m.batch(); err == nil && len(raws) == 0 {
			return errEmptyBatch
		}
		return nil // a batch, or not an array of values after all: the SDK answers
	}
	if _, err := m.message(); err != nil {
		return errNotJSONRPC
	}
	return nil
}

// errEmptyBatch answers an empty array, as JSON-RPC 2.0 ("Batch") has it:
// one response, not an array. The go-sdk answered HTTP 400 "malformed
// payload: empty batch", in plain text.
var errEmptyBatch = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: an empty batch"}

// errNotJSONRPC answers a body (or a batch member) that is JSON but not a
// JSON-RPC 2.0 message.
var errNotJSONRPC = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: not a JSON-RPC 2.0 message (want "jsonrpc": "2.0", a string "method", an "id" that is a string or an integer, or a response's "result" or "error"; nesting at most 1000 deep)`}

// parseExact decodes the first JSON value of b into v as the go-sdk decodes
// params (member names matched exactly, not case-insensitively), without a
// Decoder's buffers: bytes after the value are ignored, as a Decoder's
// first Decode ignores them.
func parseExact(b []byte, v any) error {
	_, err := segjson.Parse(b, v, segjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// maxExactID is the largest integer id the go-sdk gives back unchanged: it
// decodes a numeric id as a float64 and answers with its int64, so 1.5
// comes back as 1 and 2^63 as -2^63.
const maxExactID = 1<<53 - 1

// exactID reports whether the id of the JSON-RPC message in body is absent,
// a string, or an integer the SDK answers unchanged (MCP: "Requests MUST
// include a string or integer ID").
func exactID(body []byte) bool {
	var m struct {
		ID segjson.RawMessage `json:"id"`
	}
	if parseExact(body, &m) != nil || len(m.ID) == 0 || (m.ID[0] != '-' && (m.ID[0] < '0' || m.ID[0] > '9')) {
		return true // absent, a string, null or not a number: the SDK judges it
	}
	f, err := strconv.ParseFloat(string(m.ID), 64)
	return err == nil && f == math.Trunc(f) && math.Abs(f) <= maxExactID
}

// paramsCheckedTransport is an mcp.Transport (stdio) whose connection
// answers calls with params the go-sdk could not decode itself
// (paramsError) instead of passing them on. Over custos's StdioTransport it
// also tells the transport's gate of every answer (lineGate.noteAnswer).
type paramsCheckedTransport struct {
	mcp.Transport
	log *slog.Logger // where a dropped notification is told (debug)
}

func (t paramsCheckedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	rev := &sessionRevision{}
	st, isStdio := t.Transport.(*StdioTransport)
	if isStdio {
		st.rev = rev // before its gate reads a line
	}
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	var gate *lineGate
	if isStdio {
		gate = st.gate
	}
	return paramsCheckedConn{c, gate, rev, cmp.Or(t.log, discardLog)}, nil
}

var discardLog = slog.New(slog.DiscardHandler)

type paramsCheckedConn struct {
	mcp.Connection
	gate *lineGate        // over StdioTransport: every line the SDK reads passed it
	rev  *sessionRevision // the revision the session speaks
	log  *slog.Logger
}

// sessionRevision is the protocol revision of one stdio session, which
// its requests must keep to. The go-sdk judges each request by its own
// params._meta protocol version (SEP-2575), whatever the session did
// before: a session opened by initialize at 2025-11-25 that put the
// 2026-07-28 _meta on a request was served as 2026-07-28
// (subscriptions/listen, which custos refuses before 2026-07-28,
// subscribed it; not found was -32602), and one whose first request was of
// 2026-07-28 was then served requests without it (resources/subscribe,
// which 2026-07-28 removed; initialize). Over HTTP a request's header
// chooses its handler and the SDK refuses a _meta version that differs
// from it, so this holds there already
// (TestStdioSessionKeepsTheRevisionInitializeNegotiated,
// TestStdioSessionOfTheStatelessRevisionKeepsIt).
type sessionRevision struct {
	mu sync.Mutex
	// initID is the initialize call passed and not yet answered.
	initID jsonrpc.ID
	// legacy is set once an initialize call has been passed: the session
	// speaks the revision it negotiates (negotiated, once answered), an
	// earlier one than 2026-07-28.
	legacy     bool
	negotiated string
	// modern is set once a call of 2026-07-28 or later (by its _meta),
	// passed with no initialize before it, has been answered without an
	// error (pending holds such calls until then): a client whose request
	// the SDK refused for its revision may still initialize an earlier one.
	// (The SDK itself refuses initialize after server/discover.)
	modern  bool
	pending map[jsonrpc.ID]bool
}

// judge returns the error to answer for call req in this session, or nil
// (and then notes what req tells of the session's revision).
func (r *sessionRevision) judge(req *jsonrpc.Request) *jsonrpc.Error {
	v, _ := metaOf(req.Params)[mcp.MetaKeyProtocolVersion].(string)
	modern := v >= ProtocolStateless
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case v != "" && !modern && !r.modern:
		return errStdioLegacyMeta
	case r.legacy && modern:
		rev := r.negotiated
		if rev == "" {
			rev = "an earlier revision"
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: this session speaks the protocol revision initialize negotiated " + rev +
			`; a request of revision ` + ProtocolStateless + ` or later (params._meta["` + mcp.MetaKeyProtocolVersion + `"]) is not accepted in it`}
	case r.modern && !modern && (v != "" || !revisionFree(req.Method)):
		// An earlier revision's _meta, on ping too, is refused naming
		// the session's revision: errStdioLegacyMeta's initialize is
		// not this session's (TestStdioSessionOfTheStatelessRevisionKeepsIt).
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: this session speaks protocol revision " + ProtocolStateless +
			` or later, which its first request named: every request carries params._meta["` + mcp.MetaKeyProtocolVersion + `"] of that revision (initialize is not one of its methods)`}
	case req.Method == "initialize" && !modern:
		r.legacy, r.initID = true, req.ID
	case modern && !r.legacy:
		if r.pending == nil {
			r.pending = map[jsonrpc.ID]bool{}
		}
		r.pending[req.ID] = true
	}
	return nil
}

// refusesNotification reports whether notification req carries a
// params._meta protocol version that judge would refuse on a call: one
// before 2026-07-28 (or no revision sorting before it), in any session,
// or any, in a session that initialize opened. Such a notification cannot
// be answered (JSON-RPC 2.0: a notification never is), so it is dropped
// (paramsCheckedConn.Read), as over HTTP it is refused with 400 before the
// go-sdk sees it (refuseLegacyMeta): the SDK acted on it, so that a
// notifications/initialized of an earlier revision's _meta opened the
// session (TestStdioNotificationWithAMetaVersionIsDropped). A
// notification without the _meta passes in every session: 2026-07-28
// puts it on requests only.
func (r *sessionRevision) refusesNotification(req *jsonrpc.Request) bool {
	v, _ := metaOf(req.Params)[mcp.MetaKeyProtocolVersion].(string)
	if v == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return v < ProtocolStateless || r.legacy
}

// errStdioLegacyMeta answers a call whose params._meta names a protocol
// version before 2026-07-28, or one that is no revision and sorts before
// it ("1.0"), in a session not opened by a 2026-07-28 request (that one's
// refusal names its revision), as refuseLegacyMeta answers one over HTTP and
// errStdioBatchMeta a batch carrying one: SEP-2575 puts that _meta on
// requests of 2026-07-28 and later only, and a request of an earlier
// revision is served at the revision initialize negotiated. Such a call
// was served, decided and audited, with the go-sdk's
// ServerRequest.ProtocolVersion giving the _meta's version rather than
// the session's (TestStdioRequestWithAnEarlierMetaVersionIsRefused). The
// version is not repeated: it is any string the client chose.
var errStdioLegacyMeta = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: a request of a protocol revision before ` + ProtocolStateless +
	` is served at the revision initialize negotiated and carries no params._meta["` + mcp.MetaKeyProtocolVersion +
	`"]; only a request of ` + ProtocolStateless + ` or later carries it`}

// batchesAllowed reports whether initialize negotiated a revision before
// 2025-06-18, which removed JSON-RPC batches.
func (r *sessionRevision) batchesAllowed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.negotiated != "" && r.negotiated < firstBatchless
}

// revisionFree reports whether method is answered alike whatever revision
// its request names, so that a 2026-07-28 session may send it without the
// _meta (the go-sdk client sends ping and logging/setLevel so): ping, and
// the methods of features custos does not declare (-32601,
// undeclaredMethods).
func revisionFree(method string) bool {
	_, undeclared := featureMethods[method]
	return method == "ping" || undeclared
}

// noteAnswer reads the negotiated revision from the answer to the
// session's initialize call.
func (r *sessionRevision) noteAnswer(resp *jsonrpc.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[resp.ID] {
		delete(r.pending, resp.ID)
		r.modern = r.modern || resp.Error == nil
	}
	if !r.initID.IsValid() || resp.ID != r.initID {
		return
	}
	r.initID = jsonrpc.ID{}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if resp.Error == nil && segjson.Unmarshal(resp.Result, &res) == nil && revisionForm(res.ProtocolVersion) {
		r.negotiated = res.ProtocolVersion
	}
}

// quietReadError is err from reading the stdio connection, with any error
// that could quote the input (a decoding error) replaced by
// ErrMalformedInput. The end of input, a cancellation and a system error
// pass unchanged.
func quietReadError(err error) error {
	var pathErr *fs.PathError
	var sysErr *os.SyscallError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrClosedPipe), errors.As(err, &pathErr), errors.As(err, &sysErr):
		return err
	}
	return ErrMalformedInput
}

func (c paramsCheckedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, quietReadError(err)
		}
		req, ok := msg.(*jsonrpc.Request)
		if ok && !req.IsCall() && c.rev.refusesNotification(req) {
			// No PHI: the method only if it is one the SDK knows.
			method := "another"
			if knownNotifications[req.Method] {
				method = req.Method
			}
			c.log.Debug("stdio: dropped a notification whose params._meta protocol version is not of this session's revision", "method", method)
			continue
		}
		if !ok || !req.IsCall() {
			return msg, nil
		}
		jerr := paramsError(req.Method, req.Params)
		if jerr == nil {
			jerr = c.rev.judge(req)
		}
		if jerr == nil {
			return msg, nil
		}
		if err := c.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: jerr}); err != nil {
			return nil, err
		}
	}
}

func (c paramsCheckedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error != nil {
		// The SDK's answers that carry no code (codedError): a request
		// before initialize or cancelled before its handler ran never
		// reaches the middleware.
		coded := *resp
		coded.Error = codedError(resp.Error)
		msg = &coded
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.rev.noteAnswer(resp)
		if c.gate != nil {
			c.gate.noteAnswer(resp)
		}
	}
	return c.Connection.Write(ctx, msg)
}

// emptyName lets a 2026-07-28 call whose name member is empty (the uri
// of resources/read, the name of tools/call and prompts/get: nameInBody)
// past the go-sdk's Mcp-Name check (sdkChecksStandardHeaders), so that it
// is answered as the same call naming anything else. The SDK answered it
// -32020 "missing required Mcp-Name header", since an empty header is a
// missing one and no header can match an empty name: a read of an empty
// uri is now told what is wrong and audited like every malformed read
// (deny, bad_uri; TestEmptyURIReadIsToldSoAndAudited), and a tool call or
// prompt get of an empty name gets -32601 unaudited, as one of any name
// does, custos declaring neither tools nor prompts (undeclaredMethods;
// TestEmptyToolOrPromptNameIsAnsweredAsAnyOther). The member, and the
// header (absent, empty, or the Base64 form of ""), are set to s.emptyURI,
// which the read takes for the empty uri; every other check the SDK makes
// still runs, in its order. Only that member changes in the body (its
// last member of the name is the one the SDK reads, and the only one
// left), and the body's memo with it (setBody).
func (s *Server) emptyName(r *http.Request) {
	if s.emptyURI == "" || !sdkChecksStandardHeaders(r.Header) {
		return
	}
	if v, ok := decodeNameHeader(r.Header.Get("Mcp-Name")); !ok || v != "" {
		return
	}
	m := peekMessage(r)
	req := m.request()
	if req == nil || !req.IsCall() {
		return
	}
	member, value, ok := nameInBody(req.Method, req.Params)
	if !ok || value != "" {
		return
	}
	body, ok := withParam(m.b, member, s.emptyURI)
	if !ok {
		return
	}
	setBody(r, body) // and with it the memo the routing reads
	r.Header.Set("Mcp-Name", s.emptyURI)
}

// withParam is the JSON-RPC message body with params member name set to
// the string value, ok false if body or its params are not JSON objects.
// Of members given twice, the last is kept, as the go-sdk decodes them.
func withParam(body []byte, name, value string) ([]byte, bool) {
	var env, params map[string]segjson.RawMessage
	if segjson.Unmarshal(body, &env) != nil || segjson.Unmarshal(env["params"], &params) != nil || params == nil {
		return nil, false
	}
	v, err := segjson.Marshal(value)
	if err != nil {
		return nil, false
	}
	params[name] = v
	if env["params"], err = segjson.Marshal(params); err != nil {
		return nil, false
	}
	out, err := segjson.Marshal(env)
	return out, err == nil
}
