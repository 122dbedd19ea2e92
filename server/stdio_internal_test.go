package server

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzJudgeLine holds judgeLine to what the go-sdk's stdio transport can
// read without ending the session: a line it passes is one JSON value that
// encoding/json (the transport's decoder) reads whole, and decodes as one
// JSON-RPC message or, where batches are allowed, a non-empty array of
// them; a line it refuses is answered with JSON, with id null unless the
// answer is a batch's.
func FuzzJudgeLine(f *testing.F) {
	for _, b := range append(append(append([]string{}, wellFormedCalls...), hostileBodies...), testBodies(f)...) {
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, true)
	f.Add(`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, true)
	f.Add("  \t\r", true)
	f.Fuzz(func(t *testing.T, line string, batches bool) {
		pass, calls, answer, merge := judgeLine([]byte(line), batches)
		if pass == nil && (calls != nil || merge != nil) {
			t.Fatalf("%q: calls or answers to merge without a passed line", line)
		}
		if merge != nil && len(calls) == 0 {
			t.Fatalf("%q: answers to merge into the answer to a batch without calls", line)
		}
		if _, isBatch := answer.([]errorResponse); pass != nil && answer != nil && (!isBatch || len(calls) > 0) {
			t.Fatalf("%q: both passed and answered, and not a batch's refused members beside no call", line)
		}
		for _, a := range merge {
			if a.Error == nil {
				t.Fatalf("%q: an answer to merge that is no error", line)
			}
		}
		if pass != nil {
			checkPassed(t, line, pass, batches)
			if answer == nil {
				return
			}
		}
		if answer == nil {
			if len(bytes.Trim([]byte(line), " \t\r\n")) != 0 && !unknownNotificationsOnly(line) {
				t.Fatalf("%q neither passed nor answered", line)
			}
			return
		}
		out, err := json.Marshal(answer)
		if err != nil {
			t.Fatalf("%q: the answer does not encode: %v", line, err)
		}
		if r, ok := answer.(errorResponse); ok && (r.ID != nil || r.Error == nil) {
			t.Fatalf("%q answered %s: want an error with id null", line, out)
		}
	})
}

// unknownNotificationsOnly reports whether line is a batch of
// notifications of methods the go-sdk does not know, which JSON-RPC 2.0
// answers with nothing and custos drops (planBatch).
func unknownNotificationsOnly(line string) bool {
	var raws []json.RawMessage
	if json.Unmarshal([]byte(line), &raws) != nil || len(raws) == 0 {
		return false
	}
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		req, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok || req.IsCall() || knownNotifications[req.Method] || paramsOf[req.Method] != nil {
			return false
		}
	}
	return true
}

// checkPassed holds what judgeLine passed of line to what the go-sdk's
// stdio transport reads: newline-separated JSON values that encoding/json
// (the transport's decoder) reads whole, each a JSON-RPC message or, where
// batches are allowed, a non-empty array of them holding no notification
// (splitNotifications); at most one array, and beside it notifications
// only.
func checkPassed(t *testing.T, line string, pass []byte, batches bool) {
	t.Helper()
	rest := append(bytes.Clone(pass), '\n')
	var values, arrays int
	others := false
	for len(rest) > 0 {
		dec := json.NewDecoder(bytes.NewReader(rest))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%q passed, but the SDK's decoder fails: %v", line, err)
		}
		rest = rest[dec.InputOffset():]
		if len(rest) == 0 || rest[0] != '\n' {
			t.Fatalf("%q passed as %q: a value not followed by a newline", line, pass)
		}
		rest = rest[1:]
		values++
		if raw[0] == '[' {
			arrays++
			var raws []json.RawMessage
			if !batches || json.Unmarshal(raw, &raws) != nil || len(raws) == 0 {
				t.Fatalf("%q passed as a batch", line)
			}
			for _, r := range raws {
				msg, err := jsonrpc.DecodeMessage(r)
				if err != nil {
					t.Fatalf("%q passed with a member that is no message: %v", line, err)
				}
				if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
					t.Fatalf("%q passed as %q: a notification in the batch", line, pass)
				}
			}
			continue
		}
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			t.Fatalf("%q passed, but it is no message: %v", line, err)
		}
		if req, ok := msg.(*jsonrpc.Request); !ok || req.IsCall() {
			others = true
		}
	}
	if arrays > 1 || (values > 1 && others) {
		t.Fatalf("%q passed as %q: more than one batch, or a message beside a batch that is not a notification", line, pass)
	}
}

// drain ends when its time is over even if a call passed is never
// answered, however the timer and the waiter interleave (run many times:
// a deadline computed after the timer could leave the waiter asleep for
// good), and at once when every call is answered.
func TestDrainIsBounded(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(1))
	for i := range 2000 {
		g := newLineGate(strings.NewReader(""), &lineWriter{w: io.Discard}, 1024)
		g.drainFor = time.Duration(i%3) * time.Microsecond
		g.notePassed([]*jsonrpc.Request{{ID: id, Method: "resources/read"}})
		done := make(chan struct{})
		go func() { g.drain(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: drain of %s with a call never answered did not end", i, g.drainFor)
		}
	}
	g := newLineGate(strings.NewReader(""), &lineWriter{w: io.Discard}, 1024)
	g.drainFor = time.Hour
	g.notePassed([]*jsonrpc.Request{{ID: id, Method: "resources/read"}, {ID: jsonrpc.ID{}, Method: "subscriptions/listen"}})
	go g.noteAnswer(&jsonrpc.Response{ID: id})
	done := make(chan struct{})
	go func() { g.drain(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not end when the call was answered (a listen is not waited for)")
	}
}

// A line of exactly MaxLine bytes passes, with or without its newline at
// the end of input; one byte more is skipped and answered.
func TestLineBound(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct {
		input string
		pass  bool
	}{
		{call + "\n", true}, {call, true}, {" " + call + "\n", false}, {" " + call, false},
	} {
		var out bytes.Buffer
		g := newLineGate(strings.NewReader(tc.input), &lineWriter{w: &out}, len(call))
		g.drainFor = 0 // nobody answers the ping here
		got, _ := io.ReadAll(g)
		if passed := len(got) > 0; passed != tc.pass || (!tc.pass && !strings.Contains(out.String(), "over")) {
			t.Errorf("%d bytes (bound %d): passed %q, answered %q; want passed %v", len(tc.input), len(call), got, out.String(), tc.pass)
		}
	}
}
