package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/app/admin"
	"github.com/custos-mcp/custos/audit/access"
)

func newPolicyStatusCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status --data-dir D",
		Short: "Show which policy a running server has in force, and the last candidate it refused",
		Long: `status asks the server running on data directory D, through its admin
socket D/admin.sock, which policy it has in force and what became of the
last candidate it was offered: the answer to "did my rollout take?".

It prints:
  source     built-in, dir PATH or bundle PATH (serve --policy-dir,
             --policy-bundle)
  revision   the revision of the policy modules in force (sha256:…, the
             policy_revision of every audit record)
  bundle     for a bundle: its file digest, its signed sequence claim and
             the id of the key whose signature verified it
  loaded at  when the policy in force was loaded (UTC)
  last rejection
             the last candidate refused since the server started: when,
             its class (compile, test, agreement, signature, key, bundle,
             rollback, hook: custos_policy_rejections_total's reason), its
             digest, and its own revision, sequence claim and signing key
             when its signature verified, and the reason as its
             policy/reject audit record has it; "pending" when it was
             refused after the policy in force loaded: that rollout is not
             serving

It reads the server's memory, not the audit log (the same state as
/metrics: custos_policy_info and the custos_policy_* timestamps), so it needs
no --purpose and writes no access record; it shows no key material and no
PHI. The whole history of loads and refusals is in the audit log
(policy/load, policy/reject records; docs/audit-format.md).

It needs a running server: with none on D it fails (exit 1) and says so.
Run it as the account that runs the server, or root, as every command that
uses the admin socket (docs/audit-access.md).

Exit status: 0 the status was printed; 1 no server answers on D, or it
could not answer; 2 bad usage (no --data-dir).

Examples:
  custos policy status --data-dir /srv/custos
  custos policy status --data-dir /srv/custos --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireExistingDataDir(dir)
			if err != nil {
				return err
			}
			sock := admin.Path(string(d))
			c, err := admin.Dial(cmd.Context(), sock)
			if errors.Is(err, admin.ErrNoSocket) || errors.Is(err, admin.ErrNoAnswer) {
				return fmt.Errorf("no server answers on %s: policy status asks a running server (start it; a stopped server's loads and refusals are the policy/load and policy/reject records of its audit log: custos audit export --data-dir %s --purpose P --format jsonl)", sock, d)
			}
			if err := dialRefused(err, sock); err != nil {
				return err
			}
			defer c.Close()
			var ps app.PolicyStatus
			if err := c.PolicyStatus(cmd.Context(), &ps); err != nil {
				var ae *access.Error
				if errors.As(err, &ae) && ae.Code == "not_found" {
					return fmt.Errorf("the server on %s does not report its policy status: it predates custos policy status (see its /metrics: custos_policy_info)", d)
				}
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), ps)
			}
			printPolicyStatus(cmd, ps)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory of the running server (its admin socket D/admin.sock)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON document")
	markRequired(cmd, "data-dir")
	return cmd
}

// printPolicyStatus writes ps as lines of "name  value".
func printPolicyStatus(cmd *cobra.Command, ps app.PolicyStatus) {
	w := cmd.OutOrStdout()
	source := "built-in"
	if ps.Source != "builtin" {
		source = ps.Source + " " + ps.Path
	}
	fmt.Fprintf(w, "source          %s\n", source)
	fmt.Fprintf(w, "revision        %s\n", ps.Revision)
	if ps.BundleDigest != "" {
		fmt.Fprintf(w, "bundle          %s\n", ps.BundleDigest)
		fmt.Fprintf(w, "sequence        %s\n", orNone(ps.Sequence))
		fmt.Fprintf(w, "signed by       %s\n", ps.KeyID)
	}
	fmt.Fprintf(w, "loaded at       %s\n", ps.LoadedAt.Format(time.RFC3339))
	r := ps.LastRejection
	if r == nil {
		fmt.Fprintf(w, "last rejection  none since the server started\n")
		return
	}
	state := "(a later policy loaded since)"
	if ps.Pending {
		state = "(pending: refused after the policy in force loaded; that rollout is not serving)"
	}
	fmt.Fprintf(w, "last rejection  %s %s %s\n", r.At.Format(time.RFC3339), r.Class, state)
	fmt.Fprintf(w, "  candidate     %s\n", r.CandidateDigest)
	if r.CandidateRevision != "" {
		fmt.Fprintf(w, "  revision      %s\n", r.CandidateRevision)
	}
	if r.CandidateKeyID != "" {
		fmt.Fprintf(w, "  sequence      %s\n", orNone(r.CandidateSequence))
		fmt.Fprintf(w, "  signed by     %s\n", r.CandidateKeyID)
	}
	fmt.Fprintf(w, "  reason        %s\n", r.Reason)
}

// orNone is n, or "none" for 0 (no sequence claim).
func orNone(n uint64) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}
