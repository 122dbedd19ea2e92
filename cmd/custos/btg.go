package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/policy/btg"
	"github.com/custos-mcp/custos/store"
)

// grantsFile is the break-the-glass grants file of a data directory.
func (d dataDir) grants() string { return filepath.Join(string(d), "grants.db") }

// osOperator is the operator of 'custos btg grant': the OS account running
// the command (its name, not $USER, which anyone can set) and its roles, the
// names of the account's OS groups. The OS authenticated the account; the
// server's btg.grant_roles names the groups whose members may grant.
func osOperator() (name string, roles []string, err error) {
	u, err := user.Current()
	if err != nil {
		return "", nil, fmt.Errorf("btg: cannot tell which OS account runs this command: %w", err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return "", nil, fmt.Errorf("btg: cannot read the OS groups of account %s: %w", u.Username, err)
	}
	for _, gid := range gids {
		if g, err := user.LookupGroupId(gid); err == nil {
			roles = append(roles, g.Name)
		}
	}
	return u.Username, roles, nil
}

// osActor is who runs 'custos btg revoke' or 'btg review': the OS account
// running the command (osOperator's, as 'btg grant' records it), and whom
// the operator names with --by or --reviewer, kept apart as a claim. The
// named actor used to be recorded as the actor, defaulting to $USER: any
// name anyone can type.
func osActor(claimed string) (btg.Actor, error) {
	account, _, err := osOperator()
	if err != nil {
		return btg.Actor{}, err
	}
	return btg.Actor{Account: account, Claimed: claimed}, nil
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
		Example: `  custos btg grant --data-dir /var/lib/custos --sub dr-jones --patient ID \
    --reason "unconscious patient in ED, no chart access" --ttl 30m
  custos btg list --data-dir /var/lib/custos
  custos btg review --data-dir /var/lib/custos`,
	}
	return commandGroup(cmd, newBtgGrantCmd(), newBtgRevokeCmd(), newBtgListCmd(), newBtgReviewCmd())
}

// checkGrantee refuses a --sub the audit trail could not keep apart from
// the rest of the grant's events: the grantee is recorded verbatim in
// each btg/* record's reason (grant=<id> grantee=<sub> expires=...), so a
// space would let the name pass for further fields (a sub "dr-x
// grant=<id>" read as another grant), a quote for quoted text, and a
// control or invisible character would show as another name.
func checkGrantee(sub string) error {
	for _, r := range sub {
		if unicode.IsSpace(r) || r == '"' || !unicode.IsPrint(r) {
			return usagef("--sub %s: a user name has no space, quote, control or invisible character (%U); it is recorded verbatim as grantee= in the audit log",
				strconv.QuoteToASCII(sub), r)
		}
	}
	return nil
}

// grantPatient is the patient a grant names, as the catalog of D names it
// (labels.patient, the id the server's decisions compare): --patient
// resolved.
type grantPatient struct {
	id      string   // labels.patient
	tenants []string // the patient's tenant: one, or several for an ambiguous id
	via     string   // how --patient was read: "patient id", "URI patient segment", "URI"
}

// errPatientForms is what a --patient that names no patient of the catalog
// is told: the forms accepted.
const errPatientForms = "give the patient segment of a resource URI the clinician sees " +
	"(fhir://TENANT/patients/<segment>/...), that URI, or the catalog's patient id " +
	"(the source Patient id of FHIR input); nothing was granted"

// resolveGrantPatient reads --patient against the catalog of d. A grant
// applies to the resources whose labels.patient is the grant's patient:
// for custos's own data that is the URIs' patient segment, for FHIR input
// the source Patient id, while the URI carries its keyed id
// (docs/uris.md, "Opaque ids"). So arg may be a resource URI, a URI's
// patient segment or the patient id itself, and is resolved to the id;
// one that names no patient of the catalog is refused (a grant that
// could never apply). Without a catalog nothing can be checked: the id is
// taken as given, and warn says so. The errors never repeat arg: it may
// be a source id (an MRN).
func resolveGrantPatient(d dataDir, arg, tenant string, warn func(string)) (grantPatient, error) {
	seg, via := arg, "patient id"
	if strings.Contains(arg, "://") {
		u, err := store.ParseURI(arg)
		if err != nil {
			return grantPatient{}, usagef("--patient is not a custos resource URI (%v); %s", err, errPatientForms)
		}
		if u.Patient == "" {
			return grantPatient{}, usagef("--patient is a URI of tenant-level reference data, which names no patient (and needs no grant)")
		}
		if tenant != "" && tenant != u.Tenant {
			return grantPatient{}, usagef("--patient is a URI of tenant %s, not of --tenant %s", u.Tenant, tenant)
		}
		seg, tenant, via = u.Patient, u.Tenant, "URI"
	}
	if _, err := os.Stat(d.catalog()); errors.Is(err, os.ErrNotExist) {
		if tenant == "" {
			return grantPatient{}, usagef("no catalog in %s to find the patient's tenant in: name it with --tenant", d)
		}
		warn(fmt.Sprintf("no catalog in %s: cannot check that --patient names a patient; the grant names it as given", d))
		return grantPatient{id: seg, tenants: []string{tenant}, via: via}, nil
	}
	// Labels only: an encrypted catalog needs no data keys for them.
	st, err := store.Open(d.catalog(), store.Options{ReadOnly: true, MetadataOnly: true})
	if err != nil {
		return grantPatient{}, fmt.Errorf("btg: reading the catalog to find the patient: %w", err)
	}
	defer st.Close()
	if store.HasKeyedIDForm(seg) {
		// A keyed patient segment of FHIR input is the keyed id of the
		// compartment's Patient resource: its labels name the patient.
		var r store.Resource
		if tenant != "" {
			r, err = st.Get(store.URI{Scheme: store.SchemeFHIR, Tenant: tenant, Patient: seg, Type: store.TypePatient, ID: seg}.String())
		} else {
			r, err = st.GetByID(seg)
		}
		switch {
		case err == nil && r.Labels.Patient != "" && r.Labels.Type == store.TypePatient && (tenant == "" || r.Labels.Tenant == tenant):
			if via == "patient id" {
				via = "URI patient segment"
			}
			return grantPatient{id: r.Labels.Patient, tenants: []string{r.Labels.Tenant}, via: via}, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return grantPatient{}, fmt.Errorf("btg: reading the catalog to find the patient: %w", err)
		}
		// The compartment's Patient resource may be missing (an export
		// limited by _type, a Patient retired by a full import) while its
		// other resources, whose URIs the clinician sees, name the
		// patient in their labels.
		ps, err := st.SegmentPatients(seg)
		if err != nil {
			return grantPatient{}, fmt.Errorf("btg: reading the catalog to find the patient: %w", err)
		}
		if tenant != "" {
			ps = slices.DeleteFunc(ps, func(p store.SegmentPatient) bool { return p.Tenant != tenant })
		}
		switch {
		case len(ps) == 1:
			if via == "patient id" {
				via = "URI patient segment"
			}
			return grantPatient{id: ps[0].Patient, tenants: []string{ps[0].Tenant}, via: via}, nil
		case len(ps) > 1:
			// A keyed segment covers its tenant and source id: several
			// patients under one is a damaged catalog, not a choice.
			return grantPatient{}, fmt.Errorf("btg: the catalog's resources under the patient segment name %d different patients; nothing was granted", len(ps))
		}
	}
	tenants, err := st.PatientTenants(seg)
	if err != nil {
		return grantPatient{}, fmt.Errorf("btg: reading the catalog to find the patient: %w", err)
	}
	if tenant != "" {
		tenants = slices.DeleteFunc(tenants, func(t string) bool { return t != tenant })
	}
	if len(tenants) == 0 {
		in := ""
		if tenant != "" {
			in = " in tenant " + tenant
		}
		return grantPatient{}, usagef("--patient names no patient of the catalog %s%s: %s", d.catalog(), in, errPatientForms)
	}
	if len(tenants) > 1 {
		// Patient ids are unique within a tenant only: two people.
		return grantPatient{}, usagef("--patient names a patient in each of the tenants %s: name the tenant with --tenant, or give a resource URI",
			strings.Join(tenants, ", "))
	}
	return grantPatient{id: seg, tenants: tenants, via: via}, nil
}

func newBtgGrantCmd() *cobra.Command {
	var (
		dir, sub, patient, tenant, reason string
		ttl                               time.Duration
		asJSON                            bool
	)
	cmd := &cobra.Command{
		Use:   "grant --data-dir D --sub USER --patient ID --reason TEXT --ttl 30m",
		Short: "Grant a user emergency (ETREAT) access to one patient for a limited time",
		Long: `grant lets USER read patient ID's records with purpose of use ETREAT until the
TTL runs out or the grant is revoked. The reason is required: it is recorded,
audited and shown to the privacy officer, who reviews every use afterwards
('custos btg review').

The operator is the OS account running the command, and its roles are the
account's OS groups. The longest TTL and the roles allowed to grant are the
server's configuration (btg.max_ttl, default 4h; btg.grant_roles), which
'custos serve' publishes in grants.db: this command enforces them and has no
flag to change them. A grant that breaks the server's rules anyway (an edited
file, an older custos) is refused by the server and audited (btg/refuse).

--patient names the patient as the catalog of D knows it, in any of three
forms: a resource URI the clinician sees, that URI's patient segment (the
part after patients/), or the patient id itself (for FHIR input the source
Patient id, which the URI never shows: its segment is a keyed id). The URI
forms are resolved through the catalog to the patient id the grant names,
and the command says so. An id that names no patient of the catalog is
refused: such a grant could never apply. The grant covers the patient in
its own tenant only (patient ids are unique within a tenant): the tenant is
the URI's, or the one tenant of the catalog with that patient; when several
have one, or D has no catalog (the id cannot be checked, and the command
warns), --tenant names it.

Examples:
  custos btg grant --data-dir /srv/custos --sub dr-jones \
    --patient 0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f --reason "unconscious patient in ED, no chart access" --ttl 30m
  custos btg grant --data-dir /srv/custos --sub dr-jones --ttl 30m --reason "unconscious patient in ED" \
    --patient fhir://general-hospital/patients/b945a4b1-5683-8b7c-bbc3-d87c5f9598e5/observation/e32d1ff1-aeda-8bb8-8cd7-c828e0c0eb5a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if sub == "" || patient == "" || reason == "" {
				return usagef("grant needs --sub, --patient and --reason")
			}
			if ttl <= 0 {
				return usagef("--ttl must be more than 0, got %s", ttl)
			}
			if err := btg.CheckReason(reason); err != nil { // the library's rule, checked before anything opens
				return usagef("--reason: %w", err)
			}
			if err := checkGrantee(sub); err != nil {
				return err
			}
			op, roles, err := osOperator()
			if err != nil {
				return err
			}
			if err := existingDir(d); err != nil {
				return err
			}
			warn := func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: %s\n", msg) }
			p, err := resolveGrantPatient(d, patient, tenant, warn)
			if err != nil {
				return err
			}
			st := btg.New(d.grants(), btg.Options{})
			_, published, err := st.Rules()
			if err != nil {
				return err
			}
			if !published {
				fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: no server has published its break-the-glass rules in %s yet; "+
					"applying the defaults (max TTL %s, any operator). The server refuses a grant that breaks its own rules.\n",
					d.grants(), btg.DefaultMaxTTL)
			}
			g, err := st.Grant(btg.Request{Sub: sub, Patient: p.id, Tenant: p.tenants[0], Reason: reason, By: op, Roles: roles, TTL: ttl})
			if err != nil {
				return err
			}
			if p.via != "patient id" {
				fmt.Fprintf(cmd.ErrOrStderr(), "custos: --patient is a %s: the grant names the catalog's patient id it stands for (tenant %s)\n",
					p.via, g.Tenant)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s: %s may read the patient's records (tenant %s) with purpose ETREAT until %s\n",
				g.ID, g.Sub, g.Tenant, g.Expires.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	f.StringVar(&sub, "sub", "", "the user (principal subject) who gets access")
	f.StringVar(&patient, "patient", "", "the patient: a resource URI, its patient segment, or the catalog's patient id (FHIR: the source Patient id)")
	f.StringVar(&tenant, "tenant", "", "the patient's tenant (needed only when the catalog cannot tell it)")
	f.StringVar(&reason, "reason", "", fmt.Sprintf("why (required; at least %d characters once trimmed and scrubbed of identifiers, their placeholders not counted; recorded and reviewed)", btg.MinReasonLen))
	f.DurationVar(&ttl, "ttl", 30*time.Minute, "how long the grant lasts (at most the server's btg.max_ttl)")
	f.BoolVar(&asJSON, "json", false, "print the grant as JSON")
	markRequired(cmd, "data-dir", "sub", "patient", "reason")
	return cmd
}

func newBtgRevokeCmd() *cobra.Command {
	var dir, id, reason, by string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke --data-dir D --grant ID --reason TEXT",
		Short: "End a break-the-glass grant now",
		Long: `revoke ends grant ID now: a running server stops honouring it within a
second, and the revocation is in the audit log with --reason. Who revoked is
the OS account running the command (as for 'btg grant'); --by NAME, whom you
act as or for, is recorded beside it as a claim (claimed_by), never in its
place. --json prints the revoked grant.

Example:
  custos btg list --data-dir /srv/custos
  custos btg revoke --data-dir /srv/custos --grant 6f1c… --reason "patient transferred, access no longer needed"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			if id == "" {
				return usagef("revoke needs --grant ID ('custos btg list' shows them)")
			}
			if strings.TrimSpace(reason) == "" {
				return usagef("revoke needs --reason TEXT: why the grant ends (recorded)")
			}
			op, err := osActor(by)
			if err != nil {
				return err
			}
			if err := existingDir(d); err != nil {
				return err
			}
			g, err := btg.New(d.grants(), btg.Options{}).Revoke(id, op, reason)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "grant %s revoked at %s\n", g.ID, g.Revoked.Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	f.StringVar(&id, "grant", "", "the grant id")
	f.StringVar(&reason, "reason", "", "why (required)")
	f.StringVar(&by, "by", "", "whom you revoke as or for: recorded as a claim beside your OS account, which is the actor")
	f.BoolVar(&asJSON, "json", false, "print the revoked grant as JSON")
	markRequired(cmd, "data-dir", "grant", "reason")
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
		Long: `list prints every break-the-glass grant of D/grants.db, newest first: its
id, user, state (active, pending, expired, revoked, refused:CODE, or
no-tenant: a grant of an older custos or an edited file that names no tenant,
applies nowhere and is refused by the server; grant again with --tenant;
bad-tenant: the same for a tenant that is no tenant name, an edited file),
uses, review (yes: every use signed off; NO: uses await review; -: no use to
review), granting operator, TTL, expiry and reason. A data directory where no
grant was ever made lists none; one that does not exist is an error.

Example:
  custos btg list --data-dir /srv/custos
  custos btg list --data-dir /srv/custos --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireExistingDataDir(dir)
			if err != nil {
				return err
			}
			all, err := btg.New(d.grants(), btg.Options{}).All()
			if err != nil {
				return err
			}
			warnWithoutTenant(cmd, all)
			return printGrants(cmd, all, asJSON)
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "", "data directory (grants.db)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	markRequired(cmd, "data-dir")
	return cmd
}

// grantState is a grant's state at now.
func grantState(g btg.Grant, now time.Time) string {
	switch {
	case g.Refused != "":
		return "refused:" + g.Refused
	case !g.Revoked.IsZero():
		return "revoked"
	case g.Tenant == "" && now.Before(g.Expires):
		return "no-tenant" // applies nowhere; the server refuses it
	case !store.ValidTenant(g.Tenant) && now.Before(g.Expires):
		return "bad-tenant" // an edited file: applies nowhere; the server refuses it
	case g.Active(now):
		return "active"
	case now.Before(g.Created):
		return "pending"
	}
	return "expired"
}

// warnWithoutTenant tells the operator, once per command, how many of all
// (every grant of the file) name no tenant and would otherwise be in
// force: they open nothing (btg.Grant.Active), whatever list or review
// shows of them. The count only: no id, no patient.
func warnWithoutTenant(cmd *cobra.Command, all []btg.Grant) {
	if n := btg.InForceWithoutTenant(all, time.Now()); n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "custos: warning: %d grant(s) name no tenant (written by an older custos or an edited grants file): "+
			"they apply nowhere and the server refuses them; grant again with 'custos btg grant --tenant'\n", n)
	}
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
	fmt.Fprintln(tw, "GRANT\tUSER\tSTATE\tUSES\tREVIEWED\tBY\tROLE\tTTL\tEXPIRES (UTC)\tREASON")
	for _, g := range gs {
		rev := "yes"
		switch {
		case len(g.Uses) == 0:
			rev = "-" // no use, nothing to review: not "yes", which reads as signed off
		case !g.Reviewed():
			rev = "NO"
		}
		// Every stored string is escaped (audit.Printable): the user,
		// operator and reason are outside text, and grants.db is a file
		// anyone with write access can edit (the id, role and refusal code
		// too), so that no control character reaches the reader's terminal
		// (a cursor movement could hide a row) and a tab or line feed
		// cannot break the table.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", audit.Printable(g.ID), audit.Printable(g.Sub), audit.Printable(grantState(g, now)), len(g.Uses), rev,
			audit.Printable(g.By), audit.Printable(cmp.Or(g.ByRole, "-")), g.TTL(), g.Expires.UTC().Format("2006-01-02 15:04"), audit.Printable(g.Reason))
	}
	return tw.Flush()
}

// printUses lists, for each grant, its tenant, its revocation (when, by
// whom, why) and its reviews so far, then every use: when, the request's
// action and outcome, and its audit record (seq and event id), for the
// reviewer to look each one up ('custos audit report', 'custos audit
// prove'). Every stored string is escaped (audit.Printable), as in
// printGrants.
func printUses(cmd *cobra.Command, gs []btg.Grant) error {
	out := cmd.OutOrStdout()
	for _, g := range gs {
		fmt.Fprintf(out, "\ngrant %s (%s, tenant %s): %d use(s)\n", audit.Printable(g.ID), audit.Printable(g.Sub), audit.Printable(cmp.Or(g.Tenant, "none")), len(g.Uses))
		if !g.Revoked.IsZero() {
			fmt.Fprintf(out, "  revoked %s by %s%s: %s\n", g.Revoked.UTC().Format(time.RFC3339), audit.Printable(g.RevokedBy), claimedBy(g.RevokedByClaimed), audit.Printable(g.RevokeReason))
		}
		for _, r := range g.Reviews {
			fmt.Fprintf(out, "  reviewed %s by %s%s: %s, %s\n", r.Time.UTC().Format(time.RFC3339), audit.Printable(r.Reviewer), claimedBy(r.ReviewerClaimed), audit.Printable(r.Verdict), audit.Printable(r.Note))
		}
		if len(g.Uses) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TIME (UTC)\tACTION\tOUTCOME\tAUDIT SEQ\tAUDIT EVENT")
		for _, u := range g.Uses {
			seq := "-"
			if u.Seq > 0 {
				seq = strconv.FormatUint(u.Seq, 10)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", u.Time.UTC().Format(time.RFC3339), audit.Printable(u.Action), audit.Printable(u.Outcome), seq, audit.Printable(u.EventID))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// claimedBy renders whom an acting account named (" (claimed: NAME)"),
// "" when it named no one.
func claimedBy(name string) string {
	if name == "" {
		return ""
	}
	return " (claimed: " + audit.Printable(name) + ")"
}

func newBtgReviewCmd() *cobra.Command {
	var (
		dir, id, verdict, note, reviewer string
		asJSON                           bool
	)
	cmd := &cobra.Command{
		Use:   "review --data-dir D [--grant ID [--verdict appropriate|inappropriate --note TEXT]]",
		Short: "List unreviewed break-the-glass uses, or sign one grant's uses off",
		Long: `Without --grant, review lists every grant with uses that no review has
covered yet, and every use of each: its time, the request's action (a read, a
list page or a completion that revealed the patient's resources), outcome, and
the seq and event id of its audit record. With --grant alone it shows that
grant and every use of it. Each grant's uses follow its tenant, its revocation
(when, by whom, why) and its earlier sign-offs. With --grant, --verdict and --note it records the
privacy officer's sign-off (reviewer, verdict, note); the server writes it to
the audit log. The reviewer is the OS account running the command (as for
'btg grant'); --reviewer NAME is recorded beside it as a claim (claimed_by),
never in its place. --json prints the grants with their uses.

Example:
  custos btg review --data-dir /srv/custos
  custos btg review --data-dir /srv/custos --grant 6f1c…
  custos btg review --data-dir /srv/custos --grant 6f1c… --verdict appropriate \
    --note "documented emergency, chart updated" --reviewer privacy-officer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			// Bad usage is refused before the data directory is looked at.
			if verdict != "" && verdict != btg.VerdictAppropriate && verdict != btg.VerdictInappropriate {
				return usagef("--verdict must be %s or %s, got %q", btg.VerdictAppropriate, btg.VerdictInappropriate, verdict)
			}
			if id == "" && (verdict != "" || note != "") {
				return usagef("--verdict and --note need --grant ID")
			}
			if err := existingDir(d); err != nil {
				return err
			}
			st := btg.New(d.grants(), btg.Options{})
			if id == "" || verdict == "" && note == "" {
				all, err := st.All()
				if err != nil {
					return err
				}
				warnWithoutTenant(cmd, all)
				var shown []btg.Grant
				for _, g := range all {
					if id == "" && !g.Reviewed() || g.ID == id {
						shown = append(shown, g)
					}
				}
				if id != "" && len(shown) == 0 {
					return fmt.Errorf("%w: %s", btg.ErrNotFound, id)
				}
				if err := printGrants(cmd, shown, asJSON); err != nil || asJSON {
					return err
				}
				return printUses(cmd, shown)
			}
			op, err := osActor(reviewer)
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
	f.StringVar(&reviewer, "reviewer", "", "whom you sign off as or for: recorded as a claim beside your OS account, which is the reviewer")
	f.BoolVar(&asJSON, "json", false, "print as JSON")
	markRequired(cmd, "data-dir")
	return cmd
}
