package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
	"github.com/custos-mcp/custos/store"
)

// heldLog holds every append of an allowed read until release is closed,
// then hands it to the real log, or, if fail is set, answers it with that
// error (an fsync failure, say). Like audit.Log.Append, it stops waiting
// when its caller's context ends before the commit did. entered is closed
// when the first such append waits.
type heldLog struct {
	*audit.Log
	entered, release chan struct{}
	fail             error
}

func (l *heldLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	if e.Action == "resources/read" && e.Outcome == audit.OutcomeAllow {
		select {
		case <-l.entered:
		default:
			close(l.entered)
		}
		abandoned := func() (audit.Record, error) {
			return audit.Record{}, fmt.Errorf("audit: append not confirmed: %w", ctx.Err())
		}
		select {
		case <-ctx.Done():
			return abandoned()
		case <-l.release:
		}
		if ctx.Err() != nil {
			return abandoned() // the caller had left before the commit ended
		}
		if l.fail != nil {
			return audit.Record{}, l.fail
		}
	}
	return l.Log.Append(ctx, e)
}

// rawConn serves f's server over an in-memory transport as id and returns
// the client end, for raw JSON-RPC.
func rawConn(t *testing.T, f *fixture, id server.Identity) (context.Context, mcp.Connection) {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.srv.ServeStdio(ctx, st, id)
	}()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ctx, conn
}

// send writes a request (id > 0) or a notification (id 0) to conn.
func send(t *testing.T, ctx context.Context, conn mcp.Connection, id int, method string, params any) {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	req := &jsonrpc.Request{Method: method, Params: raw}
	if id > 0 {
		req.ID, _ = jsonrpc.MakeID(float64(id))
	}
	if err := conn.Write(ctx, req); err != nil {
		t.Fatal(err)
	}
}

// answerTo reads conn until the response to id.
// initialize opens the raw connection's session as a 2025-06-18 client:
// initialize, its answer, notifications/initialized.
func initialize(t *testing.T, ctx context.Context, conn mcp.Connection) {
	t.Helper()
	send(t, ctx, conn, 1, "initialize", map[string]any{"protocolVersion": rev2025, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	answerTo(t, ctx, conn, 1)
	send(t, ctx, conn, 0, "notifications/initialized", map[string]any{})
}

func answerTo(t *testing.T, ctx context.Context, conn mcp.Connection, id int) *jsonrpc.Response {
	t.Helper()
	want, _ := jsonrpc.MakeID(float64(id))
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the answer to %d: %v", id, err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == want {
			return r
		}
	}
}

// A read its client cancels (notifications/cancelled, or an HTTP client
// gone) while its allow record is being appended releases nothing, and
// that is all: the caller went away, the audit log did not fail. The
// server logged it as an ERROR ("audit append failed; request refused"),
// answered -32603 "audit log unavailable", and counted it as
// custos_requests_total{outcome="refused"}, the series CustosRequestsRefused
// pages on ("the audit log could not append"): any client could raise the
// alert by cancelling its reads.
func TestCancelledReadIsNotAnAuditFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	held := &heldLog{entered: make(chan struct{}), release: make(chan struct{})}
	m := ops.New(reg)
	var logs syncbuf.Buffer
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		c.Metrics = m
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	}})
	uri := f.readableURI(f.connect(f.identity("clinician")))
	held.Log = f.log
	f.reconfigure(func(c *server.Config) { c.Audit = held })
	before := len(f.records())

	ctx, conn := rawConn(t, f, f.identity("clinician"))
	initialize(t, ctx, conn)
	send(t, ctx, conn, 2, "resources/read", map[string]any{"uri": uri})
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("the read never reached its audit append")
	}
	r := cancelWhileHeld(t, ctx, conn, 2, held.release)
	if r.Result != nil {
		t.Fatalf("a cancelled read was answered with a result: %s", r.Result)
	}
	var je *jsonrpc.Error
	if !errors.As(r.Error, &je) || je.Code != server.CodeRequestCancelled || strings.Contains(je.Message, "audit") {
		t.Errorf("cancelled read answered %v; want %d saying the request was cancelled", r.Error, server.CodeRequestCancelled)
	}
	if got := requests(t, reg, ops.MethodRead, ops.OutcomeRefused); got != 0 {
		t.Errorf("custos_requests_total{method=\"resources/read\", outcome=\"refused\"} = %v after a cancelled read, want 0", got)
	}
	if got := requests(t, reg, ops.MethodRead, ops.OutcomeError); got != 1 {
		t.Errorf("custos_requests_total{method=\"resources/read\", outcome=\"error\"} = %v after a cancelled read, want 1", got)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("a cancelled read logged an error: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "request cancelled") {
		t.Errorf("the cancellation is not in the log:\n%s", logs.String())
	}
	// The commit was under way when the client cancelled: the record is
	// durable (an audited request that was not served).
	var reads int
	for _, rec := range f.records()[before:] {
		if rec.Action == "resources/read" {
			reads++
			if rec.Outcome != audit.OutcomeAllow {
				t.Errorf("the cancelled read's record: %+v", rec)
			}
		}
	}
	if reads != 1 {
		t.Errorf("%d read records after a read cancelled during its commit, want its one allow record", reads)
	}
}

// cancelWhileHeld cancels request id while something holds it, makes
// sure the server has taken the cancellation (notifications are handled
// in order, before the ping that follows), then closes release, and
// returns the answer to id.
func cancelWhileHeld(t *testing.T, ctx context.Context, conn mcp.Connection, id int, release chan struct{}) *jsonrpc.Response {
	t.Helper()
	send(t, ctx, conn, 0, "notifications/cancelled", map[string]any{"requestId": id})
	send(t, ctx, conn, 100+id, "ping", map[string]any{})
	want, _ := jsonrpc.MakeID(float64(id))
	ping, _ := jsonrpc.MakeID(float64(100 + id))
	var answer *jsonrpc.Response
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the answer to the ping: %v", err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == want {
			answer = r // answered without waiting for its append
		} else if ok && r.ID == ping {
			break
		}
	}
	close(release)
	if answer != nil {
		return answer
	}
	return answerTo(t, ctx, conn, id)
}

// A real audit failure (an fsync error) of a read whose client cancelled
// while the record was being committed is an audit failure: logged as an
// error, answered -32603 and counted refused, so CustosRequestsRefused
// pages. The server stopped waiting for the append when the client
// cancelled and took the append's "not confirmed: context canceled" for
// the whole story: the failure was answered -32800, counted as outcome
// "error" and logged at info, and nothing paged.
func TestAuditFailureAfterCancelIsARefusal(t *testing.T) {
	reg := prometheus.NewRegistry()
	held := &heldLog{entered: make(chan struct{}), release: make(chan struct{}),
		fail: errors.New("audit: append: commit: fdatasync audit.db: input/output error")}
	m := ops.New(reg)
	var logs syncbuf.Buffer
	f := newServerFixture(t, fixtureOptions{tune: func(c *server.Config) {
		c.Metrics = m
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	}})
	uri := f.readableURI(f.connect(f.identity("clinician")))
	held.Log = f.log
	f.reconfigure(func(c *server.Config) { c.Audit = held })

	ctx, conn := rawConn(t, f, f.identity("clinician"))
	initialize(t, ctx, conn)
	send(t, ctx, conn, 2, "resources/read", map[string]any{"uri": uri})
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("the read never reached its audit append")
	}
	r := cancelWhileHeld(t, ctx, conn, 2, held.release)
	if r.Result != nil {
		t.Fatalf("a read whose record failed was answered with a result: %s", r.Result)
	}
	var je *jsonrpc.Error
	if !errors.As(r.Error, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "audit log unavailable") {
		t.Errorf("a read whose audit append failed answered %v; want %d audit log unavailable", r.Error, jsonrpc.CodeInternalError)
	}
	if got := requests(t, reg, ops.MethodRead, ops.OutcomeRefused); got != 1 {
		t.Errorf("custos_requests_total{method=\"resources/read\", outcome=\"refused\"} = %v after an audit failure, want 1", got)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"audit append failed; request refused"`) {
		t.Errorf("the audit failure is not logged as an error:\n%s", logs.String())
	}
}

// The go-sdk answers a few requests with a plain Go error, which went on
// the wire with code 0, no JSON-RPC error code at all: a second
// initialize in a session (over HTTP and stdio), a request before
// initialize (stdio). They are invalid requests, -32600.
func TestSessionStateErrorsHaveACode(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	sid := rawSession(t, hs.url, tok)
	_, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2025, "Mcp-Session-Id": sid},
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	e, _ := msg["error"].(map[string]any)
	if code, _ := e["code"].(float64); code != jsonrpc.CodeInvalidRequest {
		t.Errorf("HTTP: a second initialize answered %v, want %d", msg, jsonrpc.CodeInvalidRequest)
	}

	ctx, conn := rawConn(t, f, f.identity("clinician"))
	init := map[string]any{"protocolVersion": rev2025, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}
	for i, c := range []struct {
		name, method string
		params       any
	}{
		{"a list before initialize", "resources/list", map[string]any{}},
		{"initialize", "initialize", init},
		{"a second initialize", "initialize", init},
	} {
		id := i + 1
		send(t, ctx, conn, id, c.method, c.params)
		r := answerTo(t, ctx, conn, id)
		if c.name == "initialize" {
			if r.Error != nil {
				t.Fatalf("stdio: initialize: %v", r.Error)
			}
			continue
		}
		var je *jsonrpc.Error
		if !errors.As(r.Error, &je) || je.Code != jsonrpc.CodeInvalidRequest {
			t.Errorf("stdio: %s answered %v, want %d", c.name, r.Error, jsonrpc.CodeInvalidRequest)
		}
	}
}

// heldBlobs holds every payload fetch until release is closed, then
// fetches it from the real catalog or, if fail is set, answers fail. Like
// an encrypted catalog's data-key unwrap (a Vault call under ctx), it
// gives up when its caller's context ends first.
type heldBlobs struct {
	server.Catalog
	entered, release chan struct{}
	fail             error
}

func (c *heldBlobs) Blob(ctx context.Context, digest string) ([]byte, error) {
	select {
	case <-c.entered:
	default:
		close(c.entered)
	}
	select {
	case <-ctx.Done():
		return nil, &store.KeyError{Op: "unwrap", Digest: digest, Err: ctx.Err()}
	case <-c.release:
	}
	if c.fail != nil {
		return nil, c.fail
	}
	return c.Catalog.Blob(ctx, digest)
}

// A read whose client cancels after its allow record was committed, while
// its payload is fetched (an encrypted catalog's data-key unwrap, a Vault
// round trip), is no failure of the server: the fetch was cancelled with
// the request, logged as an error ("payload fetch failed after audit"),
// answered -32603 "keys unavailable" and counted refused, so any client
// could page the operator (CustosRequestsRefused) by cancelling. And when
// the fetch did fail, the error record that says nothing was released
// was appended under the cancelled context and never written: the log
// held the allow record alone.
func TestReadCancelledDuringFetch(t *testing.T) {
	for _, c := range []struct {
		name string
		fail error
	}{
		{"fetched", nil},
		{"fetch failed", &store.IntegrityError{Digest: "sha256:00", Reason: "test"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := ops.New(reg)
			var logs syncbuf.Buffer
			held := &heldBlobs{entered: make(chan struct{}), release: make(chan struct{}), fail: c.fail}
			f := newServerFixture(t, fixtureOptions{tune: func(cfg *server.Config) {
				cfg.Metrics = m
				cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			}})
			uri := f.readableURI(f.connect(f.identity("clinician")))
			f.reconfigure(func(cfg *server.Config) {
				held.Catalog = cfg.Catalog
				cfg.Catalog = held
				cfg.Metrics = m
				cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			before := len(f.records())

			ctx, conn := rawConn(t, f, f.identity("clinician"))
			initialize(t, ctx, conn)
			send(t, ctx, conn, 2, "resources/read", map[string]any{"uri": uri})
			select {
			case <-held.entered:
			case <-ctx.Done():
				t.Fatal("the read never reached its payload fetch")
			}
			r := cancelWhileHeld(t, ctx, conn, 2, held.release)
			var outcomes []string
			for _, rec := range f.records()[before:] {
				if rec.Action == "resources/read" {
					outcomes = append(outcomes, rec.Outcome+" "+rec.Reason)
				}
			}
			if c.fail == nil {
				if r.Error != nil {
					t.Errorf("a read cancelled after its record was committed answered %v; want its result (the record says it was allowed)", r.Error)
				}
				if got := requests(t, reg, ops.MethodRead, ops.OutcomeRefused); got != 0 {
					t.Errorf("custos_requests_total{method=\"resources/read\", outcome=\"refused\"} = %v after a cancelled read, want 0", got)
				}
				for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
					if strings.Contains(line, `"level":"ERROR"`) {
						t.Errorf("a cancelled read logged an error: %s", line)
					}
				}
				if len(outcomes) != 1 || !strings.HasPrefix(outcomes[0], audit.OutcomeAllow+" ") {
					t.Errorf("read records %q, want the allow record", outcomes)
				}
				return
			}
			var je *jsonrpc.Error
			if r.Result != nil || !errors.As(r.Error, &je) || je.Code != jsonrpc.CodeInternalError {
				t.Errorf("a read whose fetch failed answered %v %s; want -32603", r.Error, r.Result)
			}
			if len(outcomes) != 2 || outcomes[1] != audit.OutcomeError+" "+server.ReasonPayloadUnavailable {
				t.Errorf("read records %q, want the allow record then an error record %s", outcomes, server.ReasonPayloadUnavailable)
			}
		})
	}
}

// heldPolicy holds every decision until its caller's context ends, then
// asks the real policy (which refuses to decide for a request that is
// gone). entered is closed when the first decision waits.
type heldPolicy struct {
	*policy.Engine
	entered chan struct{}
	visible bool // hold NothingVisible (a list's or completion's first question) too
}

func (p *heldPolicy) NothingVisible(ctx context.Context, in policy.Input) (bool, error) {
	if p.visible {
		p.hold(ctx)
	}
	return p.Engine.NothingVisible(ctx, in)
}

func (p *heldPolicy) hold(ctx context.Context) {
	select {
	case <-p.entered:
	default:
		close(p.entered)
	}
	<-ctx.Done()
}

func (p *heldPolicy) Decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	p.hold(ctx)
	return p.Engine.Decide(ctx, in)
}

func (p *heldPolicy) DecideBatch(ctx context.Context, in policy.Input, items []policy.Item) ([]policy.Decision, error) {
	p.hold(ctx)
	return p.Engine.DecideBatch(ctx, in, items)
}

// A read, list, templates list or completion whose client cancels while the policy
// decides is no failure of the policy: the evaluation ended with the
// request. The server logged it as an error ("policy could not decide;
// request refused"), which docs/operations.md reserves for a server that
// failed closed, so any client could write error lines at will.
func TestCancelledDuringDecisionIsNotAPolicyFailure(t *testing.T) {
	completion := func(string) map[string]any {
		return map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": fhirTemplate}, "argument": map[string]any{"name": "patient", "value": ""}}
	}
	for _, c := range []struct {
		name, method string
		params       func(uri string) map[string]any
		visible      bool
	}{
		{"read", "resources/read", func(uri string) map[string]any { return map[string]any{"uri": uri} }, false},
		{"list", "resources/list", func(string) map[string]any { return map[string]any{} }, false},
		{"list nothing visible", "resources/list", func(string) map[string]any { return map[string]any{} }, true},
		{"templates list", "resources/templates/list", func(string) map[string]any { return map[string]any{} }, false},
		{"completion", "completion/complete", completion, false},
		{"completion nothing visible", "completion/complete", completion, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := ops.New(reg)
			var logs syncbuf.Buffer
			f := newServerFixture(t, fixtureOptions{tune: func(cfg *server.Config) { cfg.Metrics = m }})
			uri := f.readableURI(f.connect(f.identity("clinician")))
			held := &heldPolicy{entered: make(chan struct{}), visible: c.visible}
			f.reconfigure(func(cfg *server.Config) {
				held.Engine = cfg.Policy.(*policy.Engine)
				cfg.Policy = held
				cfg.Metrics = m
				cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			before := len(f.records())

			ctx, conn := rawConn(t, f, f.identity("clinician"))
			initialize(t, ctx, conn)
			send(t, ctx, conn, 2, c.method, c.params(uri))
			select {
			case <-held.entered:
			case <-ctx.Done():
				t.Fatal("the request never reached its decision")
			}
			send(t, ctx, conn, 0, "notifications/cancelled", map[string]any{"requestId": 2})
			r := answerTo(t, ctx, conn, 2)
			var je *jsonrpc.Error
			if r.Result != nil || !errors.As(r.Error, &je) || je.Code != server.CodeRequestCancelled {
				t.Errorf("cancelled %s answered %v %s; want %d", c.method, r.Error, r.Result, server.CodeRequestCancelled)
			}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, `"level":"ERROR"`) {
					t.Errorf("a cancelled %s logged an error: %s", c.method, line)
				}
			}
			if n := len(f.records()) - before; n != 0 {
				t.Errorf("%d records for a request cancelled before its decision, want none", n)
			}
		})
	}
}
