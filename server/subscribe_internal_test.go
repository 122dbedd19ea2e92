package server

import (
	"context"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A subscription pruned in one round is dropped from the SDK's registry
// again before the next round sends anything (the SDK may have registered
// it after the prune), unless it was decided and registered anew since.
func TestPrunedSubscriptionsAreDroppedAgain(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	gone, back := new(mcp.ServerSession), new(mcp.ServerSession)
	var dropped []*mcp.ServerSession
	drop := func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		dropped = append(dropped, req.(*mcp.UnsubscribeRequest).Session)
		return nil, nil
	}
	const uri = "fhir://t/patients/7d1a3c52-0b8e-4f57-9a77-2f3d1c9b0a01/encounter/11111111-1111-4111-8111-111111111111"
	s.prune(context.Background(), target{ss: gone, drop: drop}, uri)
	s.prune(context.Background(), target{ss: back, drop: drop}, uri)
	if len(dropped) != 2 {
		t.Fatalf("prune dropped %d, want 2", len(dropped))
	}
	// Subscribed again, decided anew (registered directly: add would start
	// a watcher on the session, which these test sessions cannot serve).
	s.subs.sessions = map[*mcp.ServerSession]*subscriber{back: {uris: map[string]Identity{uri: {}}}}
	dropped = nil
	s.redropPruned(context.Background())
	if len(dropped) != 1 || dropped[0] != gone {
		t.Fatalf("dropped again %v, want only the session that did not subscribe anew", dropped)
	}
	dropped = nil
	s.redropPruned(context.Background())
	if len(dropped) != 0 {
		t.Fatalf("pruned entries kept beyond one round: %d", len(dropped))
	}
}
