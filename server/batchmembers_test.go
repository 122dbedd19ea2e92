package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// batchMembers is the batch of mixed members both batch tests send (a
// 2025-03-26 session): two calls that run, a call with bad params, a
// notification, a notification of an unknown method, and members that are
// no valid request. want is its answers, sorted (answerKeys).
func batchMembers(uri0, uri1 string) (body string, want []string) {
	read := func(id, uri string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"resources/read","params":{"uri":"` + uri + `"}}`
	}
	body = `[` + strings.Join([]string{
		read("1", uri0),
		`1`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
		`{"jsonrpc":"1.0","id":2,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/list","params":{"cursor":5,"x":"` + paramSecret + `"}}`,
		read("1.5", uri1),
		read("1", uri1),
		`{"foo":"boo"}`,
		`{"jsonrpc":"2.0","method":"notifications/` + paramName + `"}`,
	}, ",") + `]`
	return body, []string{
		"-32600 null", "-32600 null", "-32600 null", "-32600 null", "-32600 null", "-32600 null",
		"-32602 4", "result 1", "result three",
	}
}

// answerKeys reads JSON-RPC responses (an SSE stream, an array, or one
// object) and returns each as "result ID" or "CODE ID", sorted, and
// whether the answer was an array (or a stream).
func answerKeys(t *testing.T, raw string) (keys []string, array bool) {
	t.Helper()
	var msgs []map[string]any
	add := func(data string) {
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("answer %.300s: %v", raw, err)
		}
		switch v := v.(type) {
		case []any:
			array = true
			for _, e := range v {
				msgs = append(msgs, e.(map[string]any))
			}
		case map[string]any:
			msgs = append(msgs, v)
		}
	}
	if strings.HasPrefix(raw, "event:") || strings.HasPrefix(raw, ":") {
		array = true
		sc := bufio.NewScanner(strings.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				add(d)
			}
		}
	} else if strings.TrimSpace(raw) != "" {
		add(raw)
	}
	for _, m := range msgs {
		id, _ := json.Marshal(m["id"])
		if e, ok := m["error"].(map[string]any); ok {
			keys = append(keys, fmt.Sprintf("%v %s", e["code"], strings.Trim(string(id), `"`)))
		} else {
			keys = append(keys, "result "+strings.Trim(string(id), `"`))
		}
	}
	sort.Strings(keys)
	return keys, array
}

// Over HTTP, a batch (2025-03-26) is judged member by member, as JSON-RPC
// 2.0 ("Batch") has it: each member that is no valid request gets its own
// -32600 with id null ([1], [1,2,3], [{"foo":"boo"}], "jsonrpc": "1.0", an
// id that is an object or a fraction, an id already used in the batch), a
// call with bad params its own -32602, a notification of an unknown method
// nothing, and the valid calls are decided, audited and served as if sent
// alone; nothing is recorded for the refused members. An empty array gets
// one -32600 (not an array), a batch of notifications only 202 and no
// body. custos answered the whole batch with one -32600 (HTTP 400) as soon
// as one member was no message, the go-sdk answered [] with a plain-text
// 400, and a batch with bad params or one id twice was not run at all.
func TestBatchMembersAreJudgedOneByOne(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	tok := hs.tokens["clinician"]
	_, hdr, _ := post(t, hs.url, tok, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	h := map[string]string{"Mcp-Protocol-Version": "2025-03-26", "Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
	post(t, hs.url, tok, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	uri0, uri1 := twoURIs(t, f)
	mixed, mixedWant := batchMembers(uri0, uri1)
	invalid := "-32600 null"
	for _, c := range []struct {
		name, body string
		status     int
		want       []string
		array      bool
		records    int
	}{
		{"[1]", `[1]`, 200, []string{invalid}, true, 0},
		{"[1,2,3]", `[1,2,3]`, 200, []string{invalid, invalid, invalid}, true, 0},
		{`[{"foo":"boo"}]`, `[{"foo":"boo"}]`, 200, []string{invalid}, true, 0},
		{"[]", `[]`, 400, []string{invalid}, false, 0},
		{"mixed", mixed, 200, mixedWant, true, 2},
		{"notifications only", `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, 202, nil, false, 0},
		{"notifications and invalid members", `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":true,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/` + paramName + `"}]`, 200, []string{invalid}, true, 0},
		{"one id twice", `[{"jsonrpc":"2.0","id":7,"method":"resources/list"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`, 200, []string{invalid, "result 7"}, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.records())
			st, raw := postRaw(t, hs.url, tok, h, c.body)
			got, array := answerKeys(t, string(raw))
			if st != c.status || fmt.Sprint(got) != fmt.Sprint(c.want) || array != c.array {
				t.Fatalf("status %d, answers %v (array %v); want %d, %v (array %v)\n%.600s", st, got, array, c.status, c.want, c.array, raw)
			}
			if strings.Contains(string(raw), paramName) || strings.Contains(string(raw), paramSecret) || strings.Contains(string(raw), "boo") {
				t.Errorf("the answer quotes the batch: %.600s", raw)
			}
			recs := f.records()[before:]
			if len(recs) != c.records {
				t.Fatalf("%d records, want %d: %+v", len(recs), c.records, recs)
			}
			if c.name == "mixed" {
				checkMixedRecords(t, recs, uri0)
			}
		})
	}
}

// Over stdio, a batch (a session that initialized 2025-03-26) is judged
// member by member as over HTTP (TestBatchMembersAreJudgedOneByOne), and
// answered with one line: one array holding the go-sdk's answers to the
// calls it ran and custos's to the members it refused; an empty array with
// one -32600, a batch of notifications only with nothing. custos answered
// a batch with a member that is no message with one -32600 for the whole,
// and one with bad params or one id twice was not run.
func TestStdioBatchMembersAreJudgedOneByOne(t *testing.T) {
	f := newFixture(t, "")
	s := startStdio2025_03_26(t, f)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	uri0, uri1 := twoURIs(t, f)
	mixed, mixedWant := batchMembers(uri0, uri1)
	invalid := "-32600 null"
	ping := 100
	for _, c := range []struct {
		name, body string
		want       []string
		array      bool
		records    int
	}{
		{"[1]", `[1]`, []string{invalid}, true, 0},
		{"[1,2,3]", `[1,2,3]`, []string{invalid, invalid, invalid}, true, 0},
		{`[{"foo":"boo"}]`, `[{"foo":"boo"}]`, []string{invalid}, true, 0},
		{"[]", `[]`, []string{invalid}, false, 0},
		{"mixed", mixed, mixedWant, true, 2},
		{"notifications only", `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, nil, false, 0},
		{"notifications and invalid members", `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":true,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/` + paramName + `"}]`, []string{invalid}, true, 0},
		{"one id twice", `[{"jsonrpc":"2.0","id":7,"method":"resources/list"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`, []string{invalid, "result 7"}, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.records())
			s.send(c.body)
			if c.want != nil {
				_, raw := s.next()
				got, array := answerKeys(t, raw)
				if fmt.Sprint(got) != fmt.Sprint(c.want) || array != c.array {
					t.Fatalf("answers %v (array %v); want %v (array %v)\n%.600s", got, array, c.want, c.array, raw)
				}
				if strings.Contains(raw, paramName) || strings.Contains(raw, paramSecret) || strings.Contains(raw, "boo") {
					t.Errorf("the answer quotes the batch: %.600s", raw)
				}
			}
			ping++
			s.pingAnswered(ping) // nothing else was answered, and the session goes on
			recs := f.records()[before:]
			if len(recs) != c.records {
				t.Fatalf("%d records, want %d: %+v", len(recs), c.records, recs)
			}
			if c.name == "mixed" {
				checkMixedRecords(t, recs, uri0)
			}
		})
	}
}

// twoURIs returns two URIs of f's catalog whose last segments differ (a
// record's URI keeps it; its patient segment is keyed).
func twoURIs(t *testing.T, f *fixture) (string, string) {
	t.Helper()
	uris := f.allURIs()
	for _, u := range uris[1:] {
		if path.Base(u.URI) != path.Base(uris[0].URI) {
			return uris[0].URI, u.URI
		}
	}
	t.Fatal("no two URIs with different ids")
	return "", ""
}

// checkMixedRecords holds the records of batchMembers to its two calls
// that run: one read, of uri0, and one list.
func checkMixedRecords(t *testing.T, recs []audit.Record, uri0 string) {
	t.Helper()
	var actions []string
	for _, r := range recs {
		actions = append(actions, string(r.Action))
		if r.Action == server.ActionRead && (len(r.URIs) != 1 || path.Base(r.URIs[0]) != path.Base(uri0)) {
			t.Errorf("a read recorded for %v, want only the first member's", r.URIs)
		}
	}
	sort.Strings(actions)
	if fmt.Sprint(actions) != fmt.Sprint([]string{string(server.ActionList), string(server.ActionRead)}) {
		t.Errorf("records of actions %v, want one list and one read", actions)
	}
}
