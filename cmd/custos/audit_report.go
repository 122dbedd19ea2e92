package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/audit/report"
	"github.com/custos-mcp/custos/secrets"
)

// auditorKeys is what the audit tools need from a secrets provider: every
// audit keyed-hash key version ever used (audit_keys.go) and the checkpoint
// signing public keys.
type auditorKeys interface {
	AuditKeyHistory(ctx context.Context) (secrets.AuditKeyHistory, error)
	PublicKey(version int) (ed25519.PublicKey, int, error)
	SigningVersions() []int
	SigningKeyID(version int) string
}

// openAuditorKeys opens the keys of the audit tools: with --dev the key file
// that 'serve --dev' left in the data directory, otherwise Vault with the
// auditor's least privilege (policy custos-auditor).
func openAuditorKeys(cmd *cobra.Command, dev bool, d dataDir, vf *vaultFlags) (auditorKeys, func(), error) {
	if dev {
		if name := explicitVaultFlag(cmd.Flags()); name != "" {
			return nil, nil, usagef("--%s cannot be combined with --dev", name)
		}
		if err := existingFile(filepath.Join(string(d), secrets.DevKeyFile), "dev key file"); err != nil {
			return nil, nil, fmt.Errorf("%w: only a data directory served with --dev has one; with Vault drop --dev", err)
		}
		k, err := secrets.NewDev()
		if err == nil {
			err = k.PersistIn(string(d))
		}
		return k, func() {}, err
	}
	o, err := vf.options(quietLogger(cmd))
	if err != nil {
		return nil, nil, err
	}
	o.AuditorOnly = true
	v, err := secrets.OpenVault(cmd.Context(), o)
	if err != nil {
		return nil, nil, fmt.Errorf("vault: %w", err)
	}
	return v, func() { v.Close() }, nil
}

// auditKeyIDs names audit keys as records do ("audit-hmac=<id>").
func auditKeyIDs(keys []secrets.Key) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = "audit-hmac=" + k.ID
	}
	return ids
}

func newAuditHashCmd() *cobra.Command {
	var (
		dir       string
		dev       bool
		asJSON    bool
		acceptGap bool
		vf        vaultFlags
		af        accessFlags
	)
	cmd := &cobra.Command{
		Use:   "hash VALUE --data-dir D --purpose CODE [--dev]",
		Short: "Compute the lookup value under which a patient id appears in the audit log",
		Long: `Patient ids never appear in audit records: each is written as a keyed hash,
HMAC-SHA256 under the audit keyed-hash key (docs/audit-format.md). hash prints
the lookup value of VALUE under every audit key version ever used (read from
Vault's KV metadata; a record's "keys" field names the version it used), so
an auditor can search the log or an export for a patient without the log
exposing PHI. It says which versions it searched. If a version cannot be read
(destroyed or deleted in Vault) it fails, naming it, unless --accept-key-gap:
then it prints the other lookup values and states the gap.

Keys come from Vault with the auditor's policy (custos-auditor: read the audit
key and the signing public keys, nothing else; docs/vault.md), or with --dev
from the dev key file of a data directory served with --dev.

` + vaultHelp + `

Example:
  custos audit hash 0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f --data-dir ./data --dev --purpose PATRQT
  VAULT_ADDR=https://vault.internal:8200 custos audit hash PATIENT-ID --data-dir /srv/custos --purpose PATRQT`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usagef("hash takes exactly one VALUE (a patient id)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if err := af.check(access.ActionHash); err != nil {
				return err
			}
			k, closeKeys, err := openAuditorKeys(cmd, dev, d, &vf)
			if err != nil {
				return err
			}
			defer closeKeys()
			hs, keys, kv, err := patientLookup(cmd.Context(), k, args[0], acceptGap)
			if err != nil {
				return err
			}
			// Nothing is printed before the access record is durable.
			err = withAuditReader(cmd, d, func(r auditReader) error {
				_, err := r.Do(cmd.Context(), access.OpHash, access.HashRequest{Ask: af.ask(), Patient: hs[0], Keys: auditKeyIDs(keys[:1])}, access.Discard)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				type row struct {
					Key   string `json:"audit_key"`
					Value string `json:"lookup_value"`
				}
				out := struct {
					Values      []row              `json:"lookup_values"`
					KeyVersions report.KeyVersions `json:"key_versions"`
				}{make([]row, len(hs)), kv}
				for i := range hs {
					out.Values[i] = row{keys[i].ID, hs[i]}
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			for i := range hs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\taudit key %s\n", hs[i], keys[i].ID)
			}
			kv.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	f.BoolVar(&dev, "dev", false, "use the dev key file of a data directory served with --dev")
	f.BoolVar(&asJSON, "json", false, "print the lookup values as JSON")
	af.register(f, purposeRequired)
	registerAcceptKeyGap(f, &acceptGap)
	vf.register(f)
	markRequired(cmd, "data-dir", "purpose")
	return cmd
}

func newAuditReportCmd() *cobra.Command {
	var (
		dir, patient, tenant, user, since     string
		until                                 string
		dev, denials, breakGlass, disclosures bool
		asJSON, acceptGap                     bool
		vf                                    vaultFlags
		af                                    accessFlags
	)
	cmd := &cobra.Command{
		Use:   "report --data-dir D --purpose CODE (--patient ID [--tenant T] | --user SUB | --denials | --break-glass) [--since T] [--until T]",
		Short: "Privacy officer reports: accesses to a patient, a user's activity, denials, break-the-glass",
		Long: `report scans the audit log and lists the records that answer one question:

  --patient ID       who accessed the patient's records, including denials (the
                     id is turned into its lookup values first; see 'audit hash')
  --patient ID --tenant T
                     the same for the patient of that id in tenant T. A patient
                     id is unique within a tenant only and its lookup value is
                     the same in every tenant: without --tenant, the records of
                     each tenant the id is found in are listed apart, one
                     section (JSON: "tenants", each row's "tenant") per tenant,
                     never merged
  --patient ID --disclosures
                     the accounting of disclosures (45 CFR 164.528): reads that
                     released data for purposes other than treatment, payment
                     and health care operations
  --user SUB         everything one user (principal subject) did
  --denials          every denied request
  --break-glass      every emergency (ETREAT / break-the-glass) access

Filters combine; --since/--until bound the time range ([since, until)). The
output is a table, or JSON with --json. A record that does not decode stops
the report (run 'custos audit verify'). --patient needs the audit key: from
Vault with the auditor policy, or --dev for a dev data directory. It searches
under every audit key version ever used and says which; if one cannot be read
(destroyed or deleted in Vault) the report fails, naming it, unless
--accept-key-gap: then the report states that records keyed under it are
missing.

Records written before 2026-12-06 (h-audit11) of a FHIR compartment that had
no Patient resource in the catalog name it by its URI segment, not by the
source Patient id: for such a period run --patient a second time with the
patient's segment (docs/audit-format.md, section 11, gives the commands).

` + vaultHelp + `

Examples:
  custos audit report --data-dir ./data --purpose HOPERAT --dev --patient 0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f
  custos audit report --data-dir ./data --purpose HOPERAT --dev --patient ID --disclosures --since 2026-01-01
  custos audit report --data-dir ./data --purpose PATRQT --dev --patient ID --tenant general-hospital --disclosures
  custos audit report --data-dir ./data --purpose HOPERAT --user dr-jones --since 2026-11-01 --json
  custos audit report --data-dir ./data --purpose HOPERAT --denials`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			// --disclosures without --patient first: it names the flag
			// the caller gave and what it needs.
			if disclosures && patient == "" {
				return usagef("--disclosures is the accounting of disclosures for one patient: add --patient ID")
			}
			if tenant != "" && patient == "" {
				return usagef("--tenant selects the tenant of the patient: add --patient ID")
			}
			if err := checkTenant(tenant); err != nil {
				return err
			}
			if patient == "" && user == "" && !denials && !breakGlass {
				return usagef("choose what to report: --patient ID, --user SUB, --denials or --break-glass")
			}
			q := access.ReportRequest{Ask: af.ask(), Query: report.Query{Tenant: tenant, User: user, Denials: denials, BreakGlass: breakGlass, Disclosures: disclosures}}
			var keyVersions *report.KeyVersions // the key versions a patient lookup searched
			if q.Since, q.Until, err = parseTimeRange(since, until); err != nil {
				return err
			}
			if err := af.check(access.ActionReport); err != nil {
				return err
			}
			if patient != "" {
				k, closeKeys, err := openAuditorKeys(cmd, dev, d, &vf)
				if err != nil {
					return err
				}
				hs, keys, kv, err := patientLookup(cmd.Context(), k, patient, acceptGap)
				closeKeys()
				if err != nil {
					return err
				}
				q.Patients, q.PatientLabel, q.Keys, keyVersions = hs, hs[0], auditKeyIDs(keys[:1]), &kv
			}
			var rep report.Report
			err = withAuditReader(cmd, d, func(r auditReader) error {
				_, err := r.Do(cmd.Context(), access.OpReport, q, decodeInto(&rep))
				return err
			})
			if err != nil {
				return err
			}
			rep.KeyVersions = keyVersions
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	f.StringVar(&patient, "patient", "", "report on this patient id (matched by its lookup values)")
	f.StringVar(&tenant, "tenant", "", "with --patient: the patient's tenant (without it, each tenant the id is found in is listed apart)")
	f.StringVar(&user, "user", "", "report on this principal subject")
	f.BoolVar(&denials, "denials", false, "only denied requests")
	f.BoolVar(&breakGlass, "break-glass", false, "only break-the-glass (ETREAT) accesses")
	f.BoolVar(&disclosures, "disclosures", false, "with --patient: the accounting of disclosures (leaves out TPO)")
	f.StringVar(&since, "since", "", "first instant to include (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&until, "until", "", "instant to stop before (RFC 3339 or YYYY-MM-DD)")
	f.BoolVar(&dev, "dev", false, "use the dev key file of a data directory served with --dev")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	af.register(f, purposeRequired)
	registerAcceptKeyGap(f, &acceptGap)
	vf.register(f)
	markRequired(cmd, "data-dir", "purpose")
	return cmd
}
