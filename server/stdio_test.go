package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/custos-mcp/custos/server"
)

// stdioSession is a raw client of ServeStdio over custos's StdioTransport:
// it writes lines and reads the answers, one JSON value per line.
type stdioSession struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan []byte
	done  chan error
}

func startStdio(t *testing.T, f *fixture, maxLine int) *stdioSession {
	t.Helper()
	return startStdioAs(t, f, maxLine, f.identity("clinician"))
}

// startStdioAs is startStdio for the caller id.
func startStdioAs(t *testing.T, f *fixture, maxLine int, id server.Identity) *stdioSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	s := &stdioSession{t: t, in: clientOut, lines: make(chan []byte, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(clientIn)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- bytes.Clone(sc.Bytes())
		}
		close(s.lines)
	}()
	go func() {
		s.done <- f.srv.ServeStdio(ctx, &server.StdioTransport{In: serverIn, Out: serverOut, MaxLine: maxLine}, id)
		serverOut.Close()
	}()
	t.Cleanup(func() {
		clientOut.Close()
		cancel()
		<-s.done
	})
	return s
}

func (s *stdioSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("writing a line: %v", err)
	}
}

// next returns the next answer, decoded, and its raw line.
func (s *stdioSession) next() (any, string) {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			select {
			case err := <-s.done:
				s.done <- err // for the cleanup
				s.t.Fatalf("the session ended: %v", err)
			case <-time.After(5 * time.Second):
			}
			s.t.Fatal("the session ended")
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			s.t.Fatalf("answer %q is not JSON: %v", line, err)
		}
		return v, string(line)
	case <-time.After(30 * time.Second):
		s.t.Fatal("no answer in 30 s")
	}
	return nil, ""
}

// pingAnswered sends a ping with id and checks that its answer is the next
// line: the session goes on, and nothing else was answered.
func (s *stdioSession) pingAnswered(id int) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"ping"}`)
	v, raw := s.next()
	m, _ := v.(map[string]any)
	if m == nil || m["id"] != float64(id) || m["result"] == nil {
		s.t.Fatalf("ping %d answered %s", id, raw)
	}
}

// startStdio2025_03_26 starts a stdio session and initializes it at
// 2025-03-26, the last revision with JSON-RPC batches; the client has not
// sent notifications/initialized yet.
func startStdio2025_03_26(t *testing.T, f *fixture) *stdioSession {
	t.Helper()
	s := startStdio(t, f, 0)
	s.send(strings.Replace(stdioInit2025, "2025-11-25", "2025-03-26", 1))
	if v, raw := s.next(); v.(map[string]any)["result"].(map[string]any)["protocolVersion"] != "2025-03-26" {
		t.Fatalf("initialize answered %s", raw)
	}
	return s
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

const stdioInit2025 = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// Over custos's stdio transport, a line the go-sdk would end the session
// on, or answer by quoting it or with a changed id, is answered by custos
// with a JSON-RPC error naming what is wrong (id null, as JSON-RPC 2.0 asks
// when the id cannot be trusted), never quoting the line, and the session
// goes on: the ping after each is answered, and a read after all of them is
// served and audited. A blank line is no message and gets no answer.
func TestStdioAnswersMalformedLinesAndGoesOn(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, "")
	f.reconfigure(func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	s := startStdio(t, f, 4096)
	s.send(stdioInit2025)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("initialize answered %s", raw)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.pingAnswered(1)

	canary := "fhir://alice:" + paramSecret + "@general-hospital/x"
	cases := []struct {
		name, line string
		code       int64
		message    string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + canary + `"`, jsonrpc.CodeParseError, "not one valid JSON value"},
		{"two values", `{"jsonrpc":"2.0","id":3,"method":"ping"} {"x":"` + canary + `"}`, jsonrpc.CodeParseError, "not one valid JSON value"},
		{"a method that is not a string", `{"jsonrpc":"2.0","id":4,"method":["` + canary + `"]}`, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{"no version tag", `{"id":5,"method":"ping","params":{"x":"` + canary + `"}}`, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{"a scalar", `"` + canary + `"`, jsonrpc.CodeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{"an id the SDK would change", `{"jsonrpc":"2.0","id":1.5,"method":"resources/read","params":{"uri":"` + canary + `"}}`, jsonrpc.CodeInvalidRequest, "id must be a string or an integer"},
		{"an id over 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "id must be a string or an integer"},
		{"a null id", `{"jsonrpc":"2.0","id":null,"method":"resources/list"}`, jsonrpc.CodeInvalidRequest, "id must not be null"},
		{"a null id on a notification", `{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`, jsonrpc.CodeInvalidRequest, "id must not be null"},
		{"an empty batch", `[]`, jsonrpc.CodeInvalidRequest, "an empty batch"},
		{"a batch with a non-message, where the revision has none", `[{"jsonrpc":"2.0","id":6,"method":"ping"},{"x":"` + canary + `"}]`, jsonrpc.CodeInvalidRequest, "2025-06-18 removed them"},
		{"a batch after 2025-06-18", `[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, "2025-06-18 removed them"},
		{"a line over the bound", `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"x":"` + canary + strings.Repeat("y", 5000) + `"}}`, jsonrpc.CodeInvalidRequest, "over 4096 bytes"},
	}
	before := len(f.records())
	for i, c := range cases {
		s.send("")
		s.send(" \t")
		s.send(c.line)
		v, raw := s.next()
		m, _ := v.(map[string]any)
		e, _ := m["error"].(map[string]any)
		id, hasID := m["id"]
		if e == nil || e["code"] != float64(c.code) || !strings.Contains(e["message"].(string), c.message) || !hasID || id != nil {
			t.Errorf("%s: answered %s; want code %d with %q and id null", c.name, raw, c.code, c.message)
		}
		if strings.Contains(raw, paramSecret) {
			t.Errorf("%s: the answer quotes the line: %s", c.name, raw)
		}
		s.pingAnswered(100 + i)
	}
	// A call whose params the SDK could not decode keeps its own id.
	s.send(`{"jsonrpc":"2.0","id":"p","method":"resources/read","params":{"uri":5,"x":"` + paramSecret + `"}}`)
	if v, raw := s.next(); v.(map[string]any)["id"] != "p" || !strings.Contains(raw, "params.uri must be a JSON string") || strings.Contains(raw, paramSecret) {
		t.Errorf("bad params answered %s", raw)
	}
	if n := len(f.records()) - before; n != 0 {
		t.Errorf("%d records for refused lines and pings, want none", n)
	}
	s.send(`{"jsonrpc":"2.0","id":"r","method":"resources/list"}`)
	if v, raw := s.next(); v.(map[string]any)["result"] == nil {
		t.Fatalf("resources/list after the refusals answered %.200s", raw)
	}
	if recs := f.records()[before:]; len(recs) != 1 || recs[0].Action != server.ActionList {
		t.Errorf("records %v, want the one resources/list", recs)
	}
	if strings.Contains(logs.String(), paramSecret) {
		t.Errorf("a line reached the log: %s", logs.String())
	}
}

// A client that negotiated 2025-03-26, whose JSON-RPC still has batches,
// gets a batch answered as a batch over custos's stdio transport; in one
// with params the SDK would quote, that call is answered with its own error
// without quoting them and the other is run, as over HTTP, and of one with
// an id twice the first call is run and the second refused (the SDK's
// transport would end the session on it;
// TestStdioBatchMembersAreJudgedOneByOne judges every kind of member).
func TestStdioBatchesOf2025_03_26(t *testing.T) {
	f := newFixture(t, "")
	s := startStdio2025_03_26(t, f)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	v, raw := s.next()
	if a, ok := v.([]any); !ok || len(a) != 2 {
		t.Fatalf("a batch of two pings answered %s, want an array of two", raw)
	}
	s.send(`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"resources/list","params":{"cursor":5,"x":"` + paramSecret + `"}}]`)
	_, raw = s.next()
	if got, _ := answerKeys(t, raw); fmt.Sprint(got) != "[-32602 4 result 3]" || strings.Contains(raw, paramSecret) || !strings.Contains(raw, "params.cursor must be a JSON string") {
		t.Fatalf("a batch with bad params answered %s, want the ping run and the list refused, unquoted", raw)
	}
	s.send(`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
	if _, raw := s.next(); !strings.Contains(raw, `"id":7,"result"`) || !strings.Contains(raw, "an earlier call of this batch has the same id") {
		t.Fatalf("a batch with one id twice answered %s", raw)
	}
	s.pingAnswered(5)
}

// A client that writes its requests and closes stdin at once (the
// specification's stdio shutdown) gets every answer: at the end of input
// the transport waits for the calls it passed before the go-sdk, which
// cancels the calls still running when its input ends, sees the end.
func TestStdioAnswersEveryCallBeforeTheEndOfInput(t *testing.T) {
	f := newFixture(t, "")
	s := startStdio(t, f, 0)
	uri := f.allURIs()[0].URI
	s.send(stdioInit2025)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const reads = 40
	for i := range reads {
		s.send(`{"jsonrpc":"2.0","id":` + itoa(100+i) + `,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
	}
	s.in.Close()
	answered := map[float64]bool{}
	for i := 0; i < reads+1; i++ {
		v, raw := s.next()
		m, _ := v.(map[string]any)
		if m == nil || m["result"] == nil {
			t.Fatalf("answer %d: %.200s", i, raw)
		}
		answered[m["id"].(float64)] = true
	}
	if len(answered) != reads+1 {
		t.Errorf("%d distinct answers, want %d", len(answered), reads+1)
	}
	if err := <-s.done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	s.done <- nil // for the cleanup
	reqs := 0
	for _, r := range f.records() {
		if r.Action == server.ActionRead {
			reqs++
		}
	}
	if reqs != reads {
		t.Errorf("%d read records, want %d", reqs, reads)
	}
}

// A batch that mixes calls and notifications is answered with one response
// per call and none for its notifications (JSON-RPC 2.0, "Batch"), and a
// batch of notifications only gets no answer; the session goes on. The
// go-sdk's stdio transport (v1.8.0) tracked each notification of a batch as
// a call still to be answered, so the batch's answer was never written (the
// client waited for ever), and a second batch with a notification ended the
// session ("batch contains previously seen request").
func TestStdioBatchWithNotificationsIsAnswered(t *testing.T) {
	f := newFixture(t, "")
	s := startStdio2025_03_26(t, f)
	before := len(f.records())
	s.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":1,"method":"resources/list"}]`)
	v, raw := s.next()
	a, ok := v.([]any)
	if !ok || len(a) != 1 {
		t.Fatalf("a batch of a notification and a call answered %.300s, want an array of one response", raw)
	}
	if m, _ := a[0].(map[string]any); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("the call of the batch answered %.300s", raw)
	}
	s.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":3,"method":"resources/list"}, {"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	v, raw = s.next()
	if a, ok := v.([]any); !ok || len(a) != 2 {
		t.Fatalf("a second batch with two notifications answered %.300s, want an array of two responses", raw)
	}
	s.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	s.pingAnswered(4) // the batch of notifications was not answered
	var lists int
	for _, r := range f.records()[before:] {
		if r.Action == server.ActionList {
			lists++
		}
	}
	if lists != 2 {
		t.Errorf("%d list records, want the batches' 2", lists)
	}
}
