package bundle_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/bundle"
	"github.com/custos-mcp/custos/audit/scrub"
	"github.com/custos-mcp/custos/backup"
	"github.com/custos-mcp/custos/fhirsync"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/server"
)

// TestOCSFServiceIsMCPOnlyForMCPRequests: an OCSF event names the API
// service "mcp" only for a record of a request to the MCP endpoint (an
// MCP method, or an HTTP refusal at the endpoint) or of a notification
// custos sent over it. An auditor command through the admin socket or in
// process, a break-the-glass grant made with the CLI, a policy loaded from
// a directory, a sync, a restore, a retirement, an integrity failure went
// through no MCP API: their events have no api.service. Before, every
// event said "mcp", so a SIEM selecting MCP traffic by api.service.name
// counted auditors' exports and policy loads as MCP calls.
func TestOCSFServiceIsMCPOnlyForMCPRequests(t *testing.T) {
	mcp := []string{audit.ActionResourcesRead, audit.ActionResourcesList, audit.ActionResourcesTemplatesList,
		server.ActionComplete, server.ActionSubscribe, server.ActionUnsubscribe, server.ActionNotify,
		server.ActionAuthReject, server.ActionRateLimited}
	other := []string{access.ActionVerify, access.ActionExport, access.ActionReport, access.ActionProve, access.ActionHash,
		access.ActionPolicyImpact, access.ActionComplianceReport, access.ActionBackup, backup.ActionRestore,
		server.ActionPolicyLoad, server.ActionPolicyReject, server.ActionRetire, scrub.Action,
		btg.KindGrant, btg.KindRevoke, btg.KindExpire, btg.KindRefuse, btg.KindReview,
		fhirsync.ActionSyncStart, fhirsync.ActionSyncEnd}
	service := func(action string) (string, bool) {
		t.Helper()
		r := audit.Record{Seq: 1, EventID: "e1", Node: "n1", Time: time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC), Entry: audit.Entry{
			Action: action, Outcome: audit.OutcomeAllow, Principal: audit.Principal{Sub: "someone", ClientID: "c1"}, Source: "127.0.0.1:4000"}}
		b, err := bundle.OCSFAPIActivity(r)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			API struct {
				Operation string
				Service   *struct{ Name string }
			}
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.API.Operation != action {
			t.Errorf("%s: api.operation %q", action, ev.API.Operation)
		}
		if ev.API.Service == nil {
			return "", false
		}
		return ev.API.Service.Name, true
	}
	for _, a := range mcp {
		if name, ok := service(a); !ok || name != "mcp" {
			t.Errorf("%s: api.service %q (present %v), want mcp", a, name, ok)
		}
	}
	for _, a := range other {
		if name, ok := service(a); ok {
			t.Errorf("%s: api.service %q, want none: the record is of no MCP request", a, name)
		}
	}
}
