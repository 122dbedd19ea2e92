package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/policy/btg"
)

// grantsFile is the break-the-glass grants file of a data directory.
func (d dataDir) grants() string { return filepath.Join(string(d), "grants.db") }

// operator is who runs the command: the flag, else $USER.
func operator(flag, value string) (string, error) {
	if value != "" {
		return value, nil
	}
	if u := os.Getenv("USER"); u != "" {
		return u, nil
	}
	return "", usagef("--%s NAME is required ($USER is not set): grants and reviews name who acted", flag)
}

func newBtgCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "btg",
		Short: "Break-the-glass: time-limited emergency access, and its review",
		Long: `Break-the-glass lets one user read one patient's records in an emergency
(purpose of use ETREAT) for a limited time, with a reason, outside the normal
care relationships. A running server picks grants up within a second; every
grant, revocation, expiry, use and review is in the audit log.

  custos btg grant   an operator grants access (reason and TTL required)
  custos btg revoke  ends a grant early
  custos btg list    shows grants and their uses
  custos btg review  lists unreviewed uses, and records the privacy officer's
                     sign-off (--grant ID --verdict appropriate|inappropriate)`,
	}
	return commandGroup(cmd, newBtgGrantCmd(), newBtgRevokeCmd(), newBtgListCmd(), newBtgReviewCmd())
}

func newBtgGrantCmd() *cobra.Command {
	var (
		dir, sub, patient, reason, by string
		ttl, maxTTL                   time.Duration
		asJSON                        bool
	)
	cmd := &cobra.Command{
		Use:   "grant --data-dir D --sub USER --patient ID --reason TEXT --ttl 30m",
		Short: "Grant a user emergency (ETREAT) access to one patient for a limited time",
		Long: `grant lets USER read patient ID's records with purpose of use ETREAT until the
TTL runs out (at most --max-ttl, default 4h) or the grant is revoked. The reason
is required: it is recorded, audited and shown to the privacy officer, who
reviews every use afterwards ('custos btg review').

Example:
  custos btg grant --data-dir /srv/custos --sub dr-jones \
    --patient 0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f --reason "unconscious patient in ED, no chart access" --ttl 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if sub == "" || patient == "" || reason == "" {
				return usagef("grant needs --sub, --patient and --reason")
			}
			op, err := operator("by", by)
			if err != nil {
				return err
			}
			g, err := btg.New(d.grants(), btg.Options{MaxTTL: maxTTL}).Grant(btg.Request{
				Sub: sub, Patient: patient, Reason: reason, By: op, TTL: ttl})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s: %s may read the patient's records with purpose ETREAT until %s\n",
				g.ID, g.Sub, g.Expires.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	f.StringVar(&sub, "sub", "", "the user (principal subject) who gets access")
	f.StringVar(&patient, "patient", "", "the patient id (opaque UUID)")
	f.StringVar(&reason, "reason", "", "why (required; recorded and reviewed)")
	f.DurationVar(&ttl, "ttl", 30*time.Minute, "how long the grant lasts")
	f.DurationVar(&maxTTL, "max-ttl", btg.DefaultMaxTTL, "the longest TTL this deployment allows")
	f.StringVar(&by, "by", "", "the operator granting (default $USER)")
	f.BoolVar(&asJSON, "json", false, "print the grant as JSON")
	return cmd
}

func newBtgRevokeCmd() *cobra.Command {
	var dir, id, reason, by string
	cmd := &cobra.Command{
		Use:   "revoke --data-dir D --grant ID --reason TEXT",
		Short: "End a break-the-glass grant now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if id == "" {
				return usagef("revoke needs --grant ID ('custos btg list' shows them)")
			}
			op, err := operator("by", by)
			if err != nil {
				return err
			}
			g, err := btg.New(d.grants(), btg.Options{}).Revoke(id, op, reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s revoked at %s\n", g.ID, g.Revoked.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	f.StringVar(&id, "grant", "", "the grant id")
	f.StringVar(&reason, "reason", "", "why (required)")
	f.StringVar(&by, "by", "", "the operator revoking (default $USER)")
	return cmd
}

func newBtgListCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list --data-dir D",
		Short: "List break-the-glass grants, their state and uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			all, err := btg.New(d.grants(), btg.Options{}).All()
			if err != nil {
				return err
			}
			return printGrants(cmd, all, asJSON)
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func printGrants(cmd *cobra.Command, gs []btg.Grant, asJSON bool) error {
	if asJSON {
		if gs == nil {
			gs = []btg.Grant{}
		}
		return writeJSON(cmd.OutOrStdout(), gs)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GRANT\tUSER\tSTATE\tUSES\tREVIEWED\tBY\tEXPIRES (UTC)\tREASON")
	for _, g := range gs {
		state := "expired"
		switch {
		case !g.Revoked.IsZero():
			state = "revoked"
		case g.Active(now):
			state = "active"
		}
		rev := "yes"
		if !g.Reviewed() {
			rev = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", g.ID, g.Sub, state, len(g.Uses), rev, g.By,
			g.Expires.UTC().Format("2006-01-02 15:04"), strings.ReplaceAll(g.Reason, "\t", " "))
	}
	return tw.Flush()
}

func newBtgReviewCmd() *cobra.Command {
	var (
		dir, id, verdict, note, reviewer string
		asJSON                           bool
	)
	cmd := &cobra.Command{
		Use:   "review --data-dir D [--grant ID --verdict appropriate|inappropriate --note TEXT]",
		Short: "List unreviewed break-the-glass uses, or sign one grant's uses off",
		Long: `Without --grant, review lists every grant with uses that no review has
covered yet. With --grant, --verdict and --note it records the privacy officer's
sign-off (reviewer, verdict, note); the server writes it to the audit log.

Example:
  custos btg review --data-dir /srv/custos
  custos btg review --data-dir /srv/custos --grant 6f1c… --verdict appropriate \
    --note "documented emergency, chart updated" --reviewer privacy-officer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			st := btg.New(d.grants(), btg.Options{})
			if id == "" {
				if verdict != "" || note != "" {
					return usagef("--verdict and --note need --grant ID")
				}
				all, err := st.All()
				if err != nil {
					return err
				}
				var open []btg.Grant
				for _, g := range all {
					if !g.Reviewed() {
						open = append(open, g)
					}
				}
				return printGrants(cmd, open, asJSON)
			}
			op, err := operator("reviewer", reviewer)
			if err != nil {
				return err
			}
			g, err := st.ReviewGrant(id, op, verdict, note)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s: %d use(s) reviewed as %s\n", g.ID, len(g.Uses), verdict)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	f.StringVar(&id, "grant", "", "the grant to sign off")
	f.StringVar(&verdict, "verdict", "", "appropriate or inappropriate")
	f.StringVar(&note, "note", "", "the reviewer's note")
	f.StringVar(&reviewer, "reviewer", "", "who reviews (default $USER)")
	f.BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
