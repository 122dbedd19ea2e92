package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
)

// custos declares resources and completions only. Every method of the
// tools, prompts and logging features is -32601 (method not found) on both
// revisions and both transports, not an empty list: a client can tell an
// undeclared feature from an empty one (SEP-2575; the conformance suite's
// sep-2575-discover-capabilities-match-handlers). Nothing is audited for
// them: they touch no resource.
func TestUndeclaredToolsAndPromptsAreMethodNotFound(t *testing.T) {
	f := newFixture(t, "")
	hs := f.serveHTTP("clinician")
	ctx := context.Background()
	for _, rev := range []string{rev2025, rev2026} {
		for transport, connect := range map[string]func() *mcp.ClientSession{
			"stdio": func() *mcp.ClientSession { return f.connectRev(f.identity("clinician"), rev) },
			"http":  func() *mcp.ClientSession { return hs.connect(t, "clinician", rev) },
		} {
			t.Run(rev+"/"+transport, func(t *testing.T) {
				cs := connect()
				caps := cs.InitializeResult().Capabilities
				if caps.Tools != nil || caps.Prompts != nil || caps.Logging != nil || caps.Resources == nil || caps.Completions == nil {
					t.Fatalf("capabilities %+v: want resources and completions only", caps)
				}
				before := len(f.records())
				calls := map[string]func() error{
					"tools/list":   func() error { _, err := cs.ListTools(ctx, nil); return err },
					"tools/call":   func() error { _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "anything"}); return err },
					"prompts/list": func() error { _, err := cs.ListPrompts(ctx, nil); return err },
					"prompts/get":  func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "anything"}); return err },
				}
				// The go-sdk client sends logging/setLevel without the
				// 2026-07-28 _meta, which the server refuses over stateless
				// HTTP before any method is looked up: the raw POST below
				// checks that case.
				if rev != rev2026 || transport != "http" {
					calls["logging/setLevel"] = func() error {
						return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
					}
				}
				for method, call := range calls {
					if err := call(); rpcCode(err) != jsonrpc.CodeMethodNotFound {
						t.Errorf("%s: got %v, want -32601", method, err)
					}
				}
				// The declared features still answer.
				if _, err := cs.ListResources(ctx, nil); err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				if recs := f.records()[before:]; len(recs) != 1 || recs[0].Action != server.ActionList {
					t.Errorf("records %v, want only the resources/list", recs)
				}
			})
		}
	}

	// On 2026-07-28 the HTTP status of -32601 is 404 (SEP-2575), as for
	// any method the server does not implement.
	tok := hs.tokens["clinician"]
	for _, method := range []string{"tools/list", "prompts/list", "logging/setLevel"} {
		st, _, msg := post(t, hs.url, tok, map[string]string{"Mcp-Protocol-Version": rev2026},
			`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{`+meta2026("")+`}}`)
		e, _ := msg["error"].(map[string]any)
		if st != http.StatusNotFound || e == nil || e["code"] != float64(jsonrpc.CodeMethodNotFound) || msg["id"] != float64(7) {
			t.Errorf("%s at %s: HTTP %d %v, want 404 and -32601", method, rev2026, st, msg)
		}
	}
}

// completion/complete with a ref/prompt: custos has no prompts, so every
// prompt name is unknown, and the specification's completion "Error
// Handling" answers an invalid prompt name with -32602 (Invalid params), on
// both revisions. The refusal is audited like every completion (deny,
// unknown_ref) and names nobody.
func TestCompletionOfAnUnknownPromptIsInvalidParams(t *testing.T) {
	f := newFixture(t, "")
	for _, rev := range []string{rev2025, rev2026} {
		t.Run(rev, func(t *testing.T) {
			cs := f.connectRev(f.identity("clinician"), rev)
			before := len(f.records())
			_, err := cs.Complete(context.Background(), &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "test"},
			})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("got %v, want -32602", err)
			}
			recs := f.records()[before:]
			if len(recs) != 1 {
				t.Fatalf("%d records for one completion", len(recs))
			}
			if r := recs[0]; r.Action != server.ActionComplete || r.Outcome != audit.OutcomeDeny || r.Reason != "unknown_ref" || len(r.Patients) != 0 || len(r.URIs) != 0 {
				t.Errorf("audited as %s/%s %q patients %v URIs %v", r.Action, r.Outcome, r.Reason, r.Patients, r.URIs)
			}
		})
	}
}
