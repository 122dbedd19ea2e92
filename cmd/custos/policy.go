package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/audit/access"
	"github.com/custos-mcp/custos/internal/regularfile"
	"github.com/custos-mcp/custos/policy"
	"github.com/custos-mcp/custos/policy/impact"
	custosrego "github.com/custos-mcp/custos/rego"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test, check, explain and assess authorization policies before rollout",
		Long: `policy helps a security team change the Rego authorization policy safely
(docs/policy.md):

  custos policy test [DIR]            run the Rego unit tests, with coverage
  custos policy check DIR             compile as the server does and check the
                                      decision schema on built-in example inputs
  custos policy eval --input FILE     explain one decision: allow/deny, reasons,
                                      obligations and the rules that fired
  custos policy impact --candidate DIR --data-dir D
                                      replay recently audited decisions against a
                                      candidate policy (a directory, or the signed
                                      bundle with --key): what would change?
  custos policy bundle DIR -o FILE --sequence N --key ID=PEM
                                      build a signed bundle for 'serve --policy-bundle'
                                      (N: its rollback claim, above the last one)
  custos policy sign BUNDLE -o FILE --key ID=PEM
                                      re-sign a bundle (e.g. with a new key)
  custos policy verify BUNDLE --key ID=PUBPEM
                                      verify it as a server would; show its sequence
  custos policy status --data-dir D   ask the running server which policy is in
                                      force and what became of the last candidate

A policy directory holds .rego files (package custos.authz, rule decision)
and their *_test.rego tests; without a directory the built-in default policy
is used where that makes sense.

Rollout: test, check and impact the directory; bundle it with the next
sequence number; verify the bundle with the public key the servers trust
(and impact the bundle itself: --candidate BUNDLE --key ID=PUBPEM); then
write it next to the file each server's --policy-bundle names and
rename it over that file (mv: a copy in place can be read half written,
which the server rejects, and records, before it loads the whole file).
Within a second (at once on SIGHUP) each server notices it, verifies the
signature, runs the tests (seconds: wait for the log line), checks the
sequence claim against the last bundle it loaded and swaps the policy in,
or keeps serving the old one; either way it writes an
audit record (policy/load or policy/reject, with the bundle digest and the
reason) and a log line ("policy loaded", "policy candidate rejected").
'custos policy status --data-dir D' then says which policy serves and,
if the candidate was refused, why.`,
		Example: `  custos policy test ./policy && custos policy check ./policy
  custos policy impact --candidate ./policy --data-dir /var/lib/custos --purpose HOPERAT --since 2026-11-01
  custos policy bundle ./policy -o /etc/custos/policy.tar.gz.new --sequence 42 --key team=policy-signing.pem \
    && mv /etc/custos/policy.tar.gz.new /etc/custos/policy.tar.gz
  custos policy status --data-dir /var/lib/custos`,
	}
	return commandGroup(cmd, newPolicyTestCmd(), newPolicyCheckCmd(), newPolicyEvalCmd(), newPolicyImpactCmd(), newPolicyBundleCmd(), newPolicySignCmd(), newPolicyVerifyCmd(), newPolicyStatusCmd())
}

// batchCheck is policy check's verdict on the agreement of the rules
// decisions (list pages) and decision (reads) (policy.CheckBatch).
type batchCheck struct {
	Rule  bool   `json:"rule"` // the policy defines decisions
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// gridCheck is policy check's verdict on whether decision decides every
// read of the agreement grid (policy.CheckGrid).
type gridCheck struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// policyFS is the policy directory dir, or the built-in default policy.
func policyFS(dir string) (fs.FS, string, error) {
	if dir == "" {
		return custosrego.FS, "the built-in default policy", nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, "", fmt.Errorf("policy directory: %w", err)
	}
	if !st.IsDir() {
		return nil, "", usagef("%s is not a directory", dir)
	}
	return os.DirFS(dir), dir, nil
}

func newPolicyTestCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the Rego unit tests of a policy, with coverage",
		Long: `test runs every test_* rule of the *_test.rego files under DIR (default: the
built-in policy) against the policy modules under DIR, with OPA's tester, and
prints one line per test and the share of policy lines the tests evaluated
(coverage of the policy modules, tests excluded).

Exit status (as for every check: 'custos --help'):
  0  every test passed
  1  problems found: a test failed or errored, the policy or its tests do
     not compile, or there are no tests (a policy without tests is not
     ready)
  2  no verdict: bad usage, or DIR or a file in it cannot be read (a
     .rego that is a FIFO, socket or device, and a symbolic link to a
     directory in DIR, which is not followed, included)

Tests are compiled with the server's lock-down, as the server runs them at
every load: http.send, net.* and opa.runtime are compile errors there too,
and strict builtin errors are on.

Examples:
  custos policy test                     the built-in policy
  custos policy test ./policies          your policy and its tests
  custos policy test ./policies --json   machine-readable results and coverage`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("test takes at most one DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			fsys, name, err := policyFS(dir)
			if err != nil {
				return err
			}
			rep, err := policy.RunTestsCoverage(cmd.Context(), fsys)
			if err != nil {
				return policyProblem(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				for _, r := range rep.Results {
					line := fmt.Sprintf("%-7s %s.%s", r.Outcome, strings.TrimPrefix(r.Package, "data."), r.Name)
					if r.Outcome != "PASS" && r.Location != "" {
						line += " (" + r.Location + ")"
					}
					if r.Error != "" {
						line += ": " + r.Error
					}
					fmt.Fprintln(out, line)
				}
				fmt.Fprintf(out, "\n%s: %d passed, %d failed; coverage %.1f%% of policy lines\n", name, rep.Passed, rep.Failed, rep.Coverage)
			}
			if rep.Failed > 0 {
				return problemsFound(fmt.Errorf("%d of %d policy tests failed", rep.Failed, rep.Passed+rep.Failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results and coverage as JSON")
	return asCheck(cmd)
}

// policyProblem is a policy check's verdict on err, an error loading or
// testing the policy: a file that could not be read (an fs.PathError, or
// a .rego that is a FIFO, socket or device: policy verify of such a
// BUNDLE is no verdict too) or a directory the loader does not follow (a
// symbolic link to it: policy.ErrLinkedDir) is no verdict, the policy as
// given was not read whole; anything else (a syntax or compile error, no
// tests) is a problem of the policy, which the server would refuse.
func policyProblem(err error) error {
	var pe *fs.PathError
	var nr *regularfile.NotRegularError
	if errors.As(err, &pe) || errors.As(err, &nr) || errors.Is(err, policy.ErrLinkedDir) {
		return err
	}
	return problemsFound(err)
}

func newPolicyCheckCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Compile a policy as the server does and check its decisions' schema",
		Long: `check compiles the .rego files under DIR exactly as 'custos serve --policy-dir'
does (Rego v1; http.send, net.* and opa.runtime removed; strict builtin
errors), then decides a set of built-in example inputs — a clinician read and
list, a note, a billing read, a researcher read, an outsider, templates, a
request without purpose of use — and checks that every decision has the
schema the server accepts:

  {"allow": bool, "reasons": [string], "obligations": [{"op", "path", "fn"?}]}

with obligations the minimizer understands. A denial is fine; a decision the
server would have to reject (wrong shape, undefined, evaluation error,
unknown obligation) fails the check for that example. When the policy
defines the rule decisions (list pages), check decides ~800 synthetic list
items (and per page one whose URI is each string the policy names) with it
and with decision (reads), for a fixed cast of principals and each role the
policy compares input.principal.roles with (a pharmacist it adds),
as the server does at every load,
and fails if any differs: a list could show what a read denies, and the
server refuses such a policy. It also decides each of those items as a
read and fails if decision cannot decide one (an evaluation error, such as
a conflict between two definitions of one function): the server would deny
it with policy_error. It does not run the Rego tests: see
'custos policy test'.

Exit status (as for every check: 'custos --help'):
  0  the policy compiles and every decision has the accepted schema
  1  problems found: it does not compile, an example's decision would be
     rejected, list pages disagree with reads, or decision cannot decide a
     synthetic read (each printed)
  2  no verdict: bad usage, or DIR or a file in it cannot be read (a
     .rego that is a FIFO, socket or device, and a symbolic link to a
     directory in DIR, which is not followed, included)

It also says how the server will memoize the policy's decisions: per
combination of resource features when no rule can read the resource's URI,
per resource when one can read input.resource.uri or a list item's uri
(input.items[i].resource.uri, however reached: through a variable or a
function; input or input.resource used whole, walk(input), input.items
passed to a builtin other than count, and a with replacing the input or
replacing anything by a function count as reading it; the first read found
is named), not at all when the
policy calls a nondeterministic builtin such as time.now_ns; and whether
list items are decided with their uri (without it only when no rule can
read it).

Examples:
  custos policy check ./policies
  custos policy check ./policies --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usagef("check takes exactly one policy DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := policyFS(args[0]); err != nil {
				return err
			}
			eng, err := policy.LoadDir(cmd.Context(), args[0], policy.Options{})
			if err != nil {
				return policyProblem(err)
			}
			res := policy.Check(cmd.Context(), eng)
			failed := 0
			for _, r := range res {
				if !r.OK {
					failed++
				}
			}
			batch := batchCheck{OK: true, Rule: eng.HasBatch()}
			if err := policy.CheckBatch(cmd.Context(), eng); err != nil {
				batch.OK, batch.Error = false, err.Error()
			}
			reads := gridCheck{OK: true}
			if err := policy.CheckGrid(cmd.Context(), eng); err != nil {
				reads.OK, reads.Error = false, err.Error()
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, struct {
					Revision string               `json:"revision"`
					Caching  policy.Caching       `json:"caching"`
					Results  []policy.CheckResult `json:"results"`
					Batch    batchCheck           `json:"batch"`
					Reads    gridCheck            `json:"reads"`
				}{eng.Revision(), eng.Caching(), res, batch, reads}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "compiled %s (revision %s)\n", args[0], eng.Revision())
				fmt.Fprintf(out, "caching: %s\n", cachingText(eng.Caching()))
				for _, r := range res {
					if !r.OK {
						fmt.Fprintf(out, "FAIL  %s: %s\n", r.Example, r.Error)
						continue
					}
					fmt.Fprintf(out, "ok    %s: %s %s%s\n", r.Example, verdict(r.Allow), strings.Join(r.Reasons, ","), obligationCount(len(r.Obligations)))
				}
				switch {
				case !batch.OK:
					fmt.Fprintf(out, "FAIL  list pages: %s\n", batch.Error)
				case batch.Rule:
					fmt.Fprintln(out, "ok    list pages: rule decisions agrees with decision on the synthetic list requests")
				default:
					fmt.Fprintln(out, "ok    list pages: no rule decisions; lists are decided by decision per item")
				}
				if reads.OK {
					fmt.Fprintln(out, "ok    reads: decision decides every synthetic read of the list requests")
				} else {
					fmt.Fprintf(out, "FAIL  reads: %s\n", reads.Error)
				}
			}
			if failed > 0 {
				return problemsFound(fmt.Errorf("%d of %d examples got a decision the server would reject", failed, len(res)))
			}
			if !batch.OK {
				return problemsFound(errors.New("rule decisions (list pages) disagrees with decision (reads): the server refuses this policy"))
			}
			if !reads.OK {
				return problemsFound(errors.New("decision (reads) could not decide some synthetic reads: the server would deny them (policy_error)"))
			}
			if !asJSON {
				fmt.Fprintf(out, "all %d decisions have the schema the server accepts\n", len(res))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return asCheck(cmd)
}

// cachingText says in one line what the policy's shape means for serving
// (docs/policy.md, "Decision cache").
func cachingText(c policy.Caching) string {
	items := "list items are decided without their uri (no rule can read it)"
	if c.ItemsCarryURI {
		items = "list items are decided with their uri"
		if c.URIReadBy != "" {
			items += " (a rule can read a resource's uri: " + c.URIReadBy + ")"
		}
	}
	switch {
	case !c.Decisions && c.Nondeterministic != "":
		return "none: the policy calls " + c.Nondeterministic + ", so every decision is evaluated afresh; " + items
	case !c.Decisions:
		return "none; " + items
	case c.WithoutURI:
		return "decisions memoized per principal, purpose and resource features (no rule reads the resource's URI nor a list item's); " + items
	}
	return "decisions memoized per resource: some rule can read input.resource.uri or a list item's uri (or input or input.resource whole, a dynamic key, an import, a with replacing the input or by a function), so every resource is evaluated once per principal; " + items
}

func verdict(allow bool) string {
	if allow {
		return "allow"
	}
	return "deny"
}

func obligationCount(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (1 obligation)"
	}
	return fmt.Sprintf(" (%d obligations)", n)
}

func newPolicyEvalCmd() *cobra.Command {
	var (
		inputPath, dir string
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "eval --input FILE [--policy-dir DIR]",
		Short: "Explain one decision: allow or deny, reasons, obligations and the rules that fired",
		Long: `eval decides one policy input with the policy under --policy-dir (default: the
built-in policy), compiled as the server compiles it, and explains the
decision: allow or deny, the reason codes, the obligations (minimizations)
and the rules of package custos.authz that fired (evaluated to true), with
their file and line. FILE is a JSON policy input ("-" reads stdin):

  {"principal": {"sub": "dr.alice", "roles": ["clinician"], "client_id": "assistant",
                 "tenant": "general-hospital", "patients": ["7d1a3c52-..."]},
   "purpose_of_use": "TREAT", "action": "read",
   "resource": {"uri": "fhir://general-hospital/patients/7d1a3c52-.../observation/...",
                "type": "observation", "patient": "7d1a3c52-...",
                "tenant": "general-hospital", "sensitivity": [], "consent": []}}

(docs/policy.md, "Input"). The exit status is 0 whether the input is allowed
or denied, 1 if the policy could not decide (the server would deny), and 2
if nothing was decided: bad usage, an --input that cannot be read or is not
a policy input, a --policy-dir that cannot be read.

Examples:
  custos policy eval --input request.json
  custos policy eval --input request.json --policy-dir ./policies --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if inputPath == "" {
				return usagef("--input FILE is required (a JSON policy input; - for stdin)")
			}
			var raw []byte
			var err error
			if inputPath == "-" {
				raw, err = io.ReadAll(cmd.InOrStdin())
			} else {
				raw, err = os.ReadFile(inputPath)
			}
			if err != nil {
				return usagef("--input: %v", err)
			}
			var in policy.Input
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return usagef("--input %s is not a policy input: %v", inputPath, err)
			}
			fsys, _, err := policyFS(dir)
			if err != nil {
				return usagef("--policy-dir: %v", err)
			}
			eng, err := policy.Load(cmd.Context(), fsys, policy.Options{})
			if err != nil {
				return err
			}
			ex, derr := eng.Explain(cmd.Context(), in)
			out := cmd.OutOrStdout()
			if asJSON {
				obs := []string{}
				for _, o := range ex.Decision.Obligations {
					obs = append(obs, o.String())
				}
				errText := ""
				if derr != nil {
					errText = derr.Error()
				}
				if err := writeJSON(out, struct {
					Allow       bool               `json:"allow"`
					Reasons     []string           `json:"reasons"`
					Obligations []string           `json:"obligations"`
					Revision    string             `json:"revision"`
					Error       string             `json:"error,omitempty"`
					Fired       []policy.FiredRule `json:"fired"`
				}{ex.Decision.Allow, ex.Decision.Reasons, obs, ex.Decision.Revision, errText, ex.Fired}); err != nil {
					return err
				}
			} else {
				d := ex.Decision
				fmt.Fprintf(out, "decision:    %s\n", strings.ToUpper(verdict(d.Allow)))
				fmt.Fprintf(out, "reasons:     %s\n", strings.Join(d.Reasons, ", "))
				if len(d.Obligations) == 0 {
					fmt.Fprintln(out, "obligations: none")
				} else {
					fmt.Fprintln(out, "obligations:")
					for _, o := range d.Obligations {
						fmt.Fprintf(out, "  %s\n", o.String())
					}
				}
				fmt.Fprintf(out, "revision:    %s\n", d.Revision)
				if derr != nil {
					fmt.Fprintf(out, "error:       %v (the server denies)\n", derr)
				}
				fmt.Fprintln(out, "rules that fired (package custos.authz):")
				for _, f := range ex.Fired {
					fmt.Fprintf(out, "  %-22s %s\n", f.Location, f.Rule)
				}
			}
			if derr != nil {
				return exitError{code: 1, err: errors.New("the policy could not decide this input")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&inputPath, "input", "", "JSON policy input file (- for stdin)")
	f.StringVar(&dir, "policy-dir", "", "policy directory (default: the built-in policy)")
	f.BoolVar(&asJSON, "json", false, "print the decision and explanation as JSON")
	markRequired(cmd, "input")
	return cmd
}

func newPolicyImpactCmd() *cobra.Command {
	var (
		candidate, dir, since, until string
		keys                         []string
		asJSON                       bool
		af                           accessFlags
	)
	cmd := &cobra.Command{
		Use:   "impact --candidate DIR|BUNDLE [--key ID=PUBPEM...] --data-dir D --purpose CODE [--since T] [--until T]",
		Short: "Replay audited decisions against a candidate policy and report what would change",
		Long: `impact shows what a candidate policy would change before it is rolled out.
The server stores, next to each audit record of a resources/read or
resources/templates/list, the policy input it decided (patient ids replaced
by their keyed hashes; docs/audit-format.md, "Decision inputs"). impact
replays those inputs against the candidate --candidate names (compiled as the
server compiles it, and refused, as the server would refuse it, when its
Rego tests fail) and compares each result with the recorded decision:

  allow→deny            the candidate would refuse what was served
  deny→allow            the candidate would serve what was refused
  obligations changed   both allow, with different minimizations
  replay error          the candidate could not decide (the server would deny)

It prints a summary and one line per decision that would change, or JSON
with --json. resources/list pages are not replayed (they store no per-item
inputs); list and read are decided by the same rules, so the reads show the
impact. It works next to a running server: the records and inputs are
read through the server's admin socket (D/admin.sock), or from the log
itself when no server runs; either way the reading is recorded in the audit
log first (action policy/impact, with --purpose and --by). The candidate is
compiled and replayed in this process. --since/--until bound the record
times ([since, until)).

Exit status: 0 the report was made, whether or not decisions would change
(impact is a preview, not a check); 1 no report (the candidate is refused,
as a server would refuse it, or the log cannot be read: the error says
why); 2 bad usage.

--candidate is a policy directory, or a signed bundle file (from 'policy
bundle'): the very artifact a rollout will install. A bundle is loaded as
'serve --policy-bundle' loads it, its signature checked against the public
keys given with --key ID=PUBPEM (repeatable, as for 'policy verify'); the
report's first line names its revision, digest and signing key.

On a terminal, impact draws its progress (records examined) on stderr, not
with --json; the report is the same either way.

Examples:
  custos policy impact --candidate ./policies --data-dir /srv/custos --purpose HOPERAT
  custos policy impact --candidate ./policies --data-dir /srv/custos --purpose HOPERAT --since 2026-11-01
  custos policy impact --candidate ./policies --data-dir ./data --purpose HOPERAT --since 2026-11-20T08:00:00Z --json
  custos policy impact --candidate policy.tar.gz --key security-team-2026=policy-signing.pub.pem --data-dir /srv/custos --purpose HOPERAT`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if candidate == "" {
				return usagef("--candidate DIR is required (the policy to assess: a directory, or a bundle with --key)")
			}
			d, err := requireDataDir(dir)
			if err != nil {
				return err
			}
			var opts impact.Options
			if opts.Since, opts.Until, err = parseTimeRange(since, until); err != nil {
				return err
			}
			// Vetted as a server loads a policy (compiled, its Rego tests
			// run; a bundle's signature checked): a candidate the server
			// would reject is not previewed as if it could change anything.
			eng, title, err := loadImpactCandidate(cmd, candidate, keys)
			if err != nil {
				return err
			}
			if err := af.check(access.ActionPolicyImpact); err != nil {
				return err
			}
			tick, done := progress(progressTo(cmd, asJSON), "replaying audited decisions", true)
			opts.Progress = tick
			var rep impact.Report
			req := access.ImpactRequest{Ask: af.ask(), Since: opts.Since, Until: opts.Until}
			err = withAuditReader(cmd, d, func(r auditReader) error {
				_, err := r.Do(cmd.Context(), access.OpImpact, req, func(rd io.Reader) error {
					src, err := access.ReadImpact(rd)
					if err == nil {
						rep, err = impact.Replay(cmd.Context(), eng, src, opts)
					}
					return err
				})
				return err
			})
			done()
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			fmt.Fprintln(cmd.OutOrStdout(), title)
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	af.register(f, purposeRequired)
	f.StringVar(&candidate, "candidate", "", "the candidate policy: a directory of .rego files, or a signed bundle file (with --key)")
	f.StringArrayVar(&keys, "key", nil, "ID=PUBPEM: with a bundle --candidate, an ES256 public key a server trusts (repeatable)")
	f.StringVar(&dir, "data-dir", "", "data directory holding audit.db")
	f.StringVar(&since, "since", "", "first instant to replay (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&until, "until", "", "instant to stop before (RFC 3339 or YYYY-MM-DD)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	markRequired(cmd, "candidate", "data-dir", "purpose")
	return cmd
}

// loadImpactCandidate loads the candidate of policy impact as a server
// would: a directory compiled with its tests run, or a bundle file whose
// signature is checked against keys. It returns the engine and the report's
// title line.
func loadImpactCandidate(cmd *cobra.Command, candidate string, keys []string) (*policy.Engine, string, error) {
	st, err := os.Stat(candidate)
	if err != nil {
		return nil, "", fmt.Errorf("--candidate: %w", err)
	}
	if st.IsDir() {
		if len(keys) > 0 {
			return nil, "", usagef("--key verifies a bundle's signature; --candidate %s is a directory", candidate)
		}
		eng, err := policy.DirSource{Dir: candidate, AllowNoTests: true}.Load(cmd.Context())
		if err != nil {
			return nil, "", fmt.Errorf("candidate: %w", err)
		}
		return eng, fmt.Sprintf("candidate %s (revision %s)", candidate, eng.Revision()), nil
	}
	if !st.Mode().IsRegular() {
		return nil, "", usagef("--candidate %s is neither a policy directory nor a bundle file", candidate)
	}
	if len(keys) == 0 {
		return nil, "", usagef("--candidate %s is a bundle file: give --key ID=PUBPEM (repeatable), the public keys a server trusts, to check its signature", candidate)
	}
	vks, err := parseVerificationKeys(keys)
	if err != nil {
		return nil, "", err
	}
	eng, info, err := policy.LoadBundle(cmd.Context(), candidate, vks, policy.Options{})
	if err != nil {
		return nil, "", fmt.Errorf("candidate: %w", err)
	}
	return eng, fmt.Sprintf("candidate %s (revision %s, digest %s, signed by %s)", candidate, info.Revision, info.Digest, info.KeyID), nil
}
