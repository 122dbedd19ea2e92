package fhirsync

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custos-mcp/custos/audit"
)

// Audit actions of a sync.
const (
	ActionSyncStart = "sync/start"
	ActionSyncEnd   = "sync/end"
)

// Appender is the audit log a sync writes to (*audit.Log). Append returns
// when the record is durable.
type Appender interface {
	Append(ctx context.Context, e audit.Entry) (audit.Record, error)
}

// AuditRecorder records sync events in the audit log.
type AuditRecorder struct {
	Log Appender
	// Principal is who runs the sync: the CLI's OS account, or the
	// server's schedule; ClientID is the SMART client id.
	Principal audit.Principal
	// Dev marks records of a sync signed with a --dev key.
	Dev bool
	// Keys names the client key version ("fhir-client=transit/custos-fhir-client@1").
	Keys []string
}

// RecordSync appends the record of e.
func (r AuditRecorder) RecordSync(ctx context.Context, e Event) error {
	_, err := r.Log.Append(ctx, AuditEntry(e, r.Principal, r.Dev, r.Keys))
	return err
}

// maxReason bounds the reason of an audit record.
const maxReason = 1000

// AuditEntry is the audit record of e. Source is the FHIR base (never
// credentials); Reason carries the mode, the counts and, on failure, the
// error (which names URL paths and files, never a token or a payload).
func AuditEntry(e Event, p audit.Principal, dev bool, keys []string) audit.Entry {
	ent := audit.Entry{Principal: p, Source: e.Base, Dev: dev, Keys: slices.Clone(keys), Outcome: audit.OutcomeAllow}
	var b strings.Builder
	if e.Full {
		b.WriteString("full")
	} else {
		fmt.Fprintf(&b, "incremental since=%s", e.Since.UTC().Format(time.RFC3339))
	}
	if e.Tenant != "" {
		fmt.Fprintf(&b, " tenant=%s", e.Tenant)
	}
	switch e.Phase {
	case "start":
		ent.Action = ActionSyncStart
	default:
		ent.Action = ActionSyncEnd
		fmt.Fprintf(&b, " mode=%s resources=%d deleted=%d requests=%d duration=%s", orNone(e.Mode), e.Resources, e.Deleted, e.Requests, e.Duration.Round(time.Millisecond))
		if len(e.Types) > 0 {
			ts := make([]string, 0, len(e.Types))
			for t, n := range e.Types {
				ts = append(ts, fmt.Sprintf("%s:%d", t, n))
			}
			slices.Sort(ts)
			b.WriteString(" types=" + strings.Join(ts, ","))
		}
		if e.DeletesIgnored > 0 {
			// Written only when the server listed some: records of syncs
			// without them read as before.
			fmt.Fprintf(&b, " deletes_ignored=%d", e.DeletesIgnored)
		}
		if e.Binaries > 0 {
			// Written only when some were fetched: records of syncs that
			// fetched none read as before.
			fmt.Fprintf(&b, " binaries_fetched=%d", e.Binaries)
		}
		if e.Skipped.Reads > 0 || e.Skipped.Outcomes > 0 {
			// Written only when some were left out: records of syncs that
			// left out none read as before.
			fmt.Fprintf(&b, " read_requests_skipped=%d search_outcomes_skipped=%d", e.Skipped.Reads, e.Skipped.Outcomes)
		}
		if e.Skipped.Includes > 0 {
			// Written only when a page held some, as above.
			fmt.Fprintf(&b, " search_includes_skipped=%d", e.Skipped.Includes)
		}
		if e.Err != nil {
			ent.Outcome = audit.OutcomeError
			b.WriteString(" error: " + e.Err.Error())
		}
	}
	ent.Reason = b.String()
	if len(ent.Reason) > maxReason {
		ent.Reason = strings.ToValidUTF8(ent.Reason[:maxReason], "") + "…"
	}
	return ent
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
