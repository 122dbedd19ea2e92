package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/internal/syncbuf"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/server/ops"
)

// heldLog holds every append of an allowed read until its caller's
// context ends, then hands it to the real log (which refuses it: the
// caller is gone). entered is closed when the first such append waits.
type heldLog struct {
	*audit.Log
	entered chan struct{}
}

func (l *heldLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	if e.Action == "resources/read" && e.Outcome == audit.OutcomeAllow {
		select {
		case <-l.entered:
		default:
			close(l.entered)
		}
		<-ctx.Done()
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
	held := &heldLog{entered: make(chan struct{})}
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
	send(t, ctx, conn, 1, "initialize", map[string]any{"protocolVersion": rev2025, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	answerTo(t, ctx, conn, 1)
	send(t, ctx, conn, 0, "notifications/initialized", map[string]any{})
	send(t, ctx, conn, 2, "resources/read", map[string]any{"uri": uri})
	select {
	case <-held.entered:
	case <-ctx.Done():
		t.Fatal("the read never reached its audit append")
	}
	send(t, ctx, conn, 0, "notifications/cancelled", map[string]any{"requestId": 2})
	r := answerTo(t, ctx, conn, 2)
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
	for _, rec := range f.records()[before:] {
		if rec.Action == "resources/read" {
			t.Errorf("a read cancelled before its record was appended has a record: %+v", rec)
		}
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
