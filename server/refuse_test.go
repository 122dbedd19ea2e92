package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
)

// refusals are requests the server refuses before any decision, each with
// its own answer and audit reason (server.refuse).
func refusals(f *fixture) []struct {
	name, reason string
	code         int64
	do           func(cs *mcp.ClientSession) error
} {
	ctx := context.Background()
	missing := f.allURIs()[0].URI
	if u, err := store.ParseURI(missing); err == nil {
		u.ID = "00000000-0000-4000-8000-000000000000"
		missing = u.String()
	}
	return []struct {
		name, reason string
		code         int64
		do           func(cs *mcp.ClientSession) error
	}{
		{"read of a bad uri", server.ReasonBadURI, jsonrpc.CodeInvalidParams, func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fhir://x/../y"})
			return err
		}},
		{"read of a missing uri", server.ReasonNotFound, server.CodeResourceNotFound, func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing})
			return err
		}},
		{"list with a forged cursor", server.ReasonBadCursor, jsonrpc.CodeInvalidParams, func(cs *mcp.ClientSession) error {
			_, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: "c1.AAAA"})
			return err
		}},
		{"templates with a forged cursor", server.ReasonBadCursor, jsonrpc.CodeInvalidParams, func(cs *mcp.ClientSession) error {
			_, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: "c1.AAAA"})
			return err
		}},
		{"completion of an unknown argument", server.ReasonUnknownArgument, jsonrpc.CodeInvalidParams, func(cs *mcp.ClientSession) error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: fhirTemplate}, Argument: mcp.CompleteParamsArgument{Name: "nope"}})
			return err
		}},
		{"subscription to a bad uri", server.ReasonBadURI, jsonrpc.CodeInvalidParams, func(cs *mcp.ClientSession) error {
			return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "fhir://x/../y"})
		}},
	}
}

// Every refusal is recorded before it is answered, with its reason; and
// when its record cannot be committed the caller gets a -32603 saying the
// audit log is unavailable instead of the refusal's own answer (fail
// closed: a refusal never goes unrecorded silently).
func TestRefusalsAreRecordedOrFailClosed(t *testing.T) {
	f := newFixture(t, "")
	cs := f.connectRev(f.identity("clinician"), rev2025)
	cases := refusals(f)
	for _, c := range cases {
		before := len(f.records())
		err := c.do(cs)
		if e := rpcError(err); e == nil || e.Code != c.code {
			t.Errorf("%s: answered %v, want code %d", c.name, err, c.code)
		}
		recs := f.records()
		if len(recs) != before+1 || recs[before].Reason != c.reason || recs[before].Outcome != audit.OutcomeDeny {
			t.Errorf("%s: want one deny record with reason %q, got %d new records (last %+v)", c.name, c.reason, len(recs)-before, recs[len(recs)-1])
		}
	}

	f.log.Close() // every append now fails
	for _, c := range cases {
		err := c.do(cs)
		e := rpcError(err)
		if e == nil || e.Code != jsonrpc.CodeInternalError || !strings.Contains(e.Message, "audit log unavailable") {
			t.Errorf("%s with the audit log down: answered %v, want -32603 audit log unavailable", c.name, err)
		}
	}
}
