package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/store/synth"
)

func newSeedCmd() *cobra.Command {
	var (
		out      string
		patients int
		seed     int64
		tenant   string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "seed --out DIR --patients N [--seed S]",
		Short: "Generate a deterministic synthetic data set (never real PHI)",
		Long: `seed writes a synthetic, deterministic FHIR R4 data set to DIR: Patients,
Observations, Conditions (some labelled sensitive: HIV, 42 CFR Part 2 substance
use), MedicationRequests, Encounters, Coverage, free-text clinical notes, lab
report PDFs and small PNG images, plus manifest.jsonl for 'custos import',
example principal files in DIR/principals/ and SUMMARY.json naming the
edge-case patients (aged 92, VIP, opted out, HIV, SUD, restricted ZIP3).

The same data set is also written in standard FHIR R4 formats: a Bulk Data
export (DIR/bulk/<Type>.ndjson with its $export manifest DIR/bulk-export.json)
and one transaction Bundle per patient (DIR/bundles/<patient>.json), with
notes, reports and images as base64 attachments, labels in meta.security and
the opt-out as a Consent (docs/import.md).

The same --patients, --seed and --tenant always produce byte-identical output.
About 10 resources are generated per patient: --patients 10000 gives ~100,000.

Example:
  custos seed --out ./synthetic --patients 50
  custos import --data-dir ./data ./synthetic`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out is required")
			}
			if patients < 1 || patients > 1_000_000 {
				return usagef("--patients must be between 1 and 1000000, got %d", patients)
			}
			// Checked as import checks it, before anything is written.
			if err := checkTenant(tenant); err != nil {
				return err
			}
			if strings.HasSuffix(tenant, "-") {
				// The URIs could name it, but the data set also uses it
				// as a host label, which may not end with '-'.
				return usagef("--tenant %s: want lowercase letters, digits and - (not first or last), at most 63, e.g. general-hospital", strconv.Quote(tenant))
			}
			if err := emptyTarget(out); err != nil {
				return err
			}
			tick, done := progress(progressTo(cmd, asJSON), "generating patients", true)
			sum, err := synth.Generate(cmd.Context(), out, synth.Options{Patients: patients, Seed: seed, Tenant: tenant, Progress: tick})
			done()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), sum)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d resources for %d synthetic patients (%d bytes) to %s\nnext: custos import --data-dir DATA %s\n",
				sum.Resources, sum.Patients, sum.Bytes, out, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write (must be empty or not exist)")
	f.IntVar(&patients, "patients", 0, "number of synthetic patients")
	f.Int64Var(&seed, "seed", 1, "random seed; the same seed gives the same data")
	f.StringVar(&tenant, "tenant", "general-hospital", "tenant id used in URIs and labels")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	markRequired(cmd, "out", "patients")
	return cmd
}
