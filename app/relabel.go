package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/custos-mcp/custos/fhirin"
	"github.com/custos-mcp/custos/store"
)

// Relabel configures RelabelCatalog.
type Relabel struct {
	// DataKeys decrypts the stored bodies of an encrypted catalog (nil:
	// plaintext catalog).
	DataKeys store.DataKeys
	// DryRun reports what would change and changes nothing.
	DryRun bool
	// Timeout bounds the wait for an import's lock (0: store default).
	Timeout time.Duration
	// Progress is called with the resources read and their total; nil for
	// none.
	Progress func(done, total int)
	// Logger receives operational messages, never content; nil discards.
	Logger *slog.Logger
}

// RelabelCatalog derives the labels of every stored FHIR resource of the
// catalog at catalogPath anew from its stored body with the reader's
// current rules (fhirin.BodyLabels) and records their version
// (fhirin.LabelRules), which Open requires of the catalog it serves:
// store.Relabel joined to the FHIR reader's rules, as ImportFHIR joins
// the reader to the import. Like an import, it writes no audit record: a
// running server audits the changes it is notified of when it swaps the
// relabelled catalog in.
func RelabelCatalog(ctx context.Context, catalogPath string, o Relabel) (store.RelabelReport, error) {
	return store.Relabel(ctx, catalogPath, store.RelabelOptions{
		Rules: fhirin.LabelRules, Derive: fhirin.BodyLabels, DryRun: o.DryRun, Progress: o.Progress,
	}, store.Options{DataKeys: o.DataKeys, Timeout: o.Timeout, Logger: o.Logger})
}
