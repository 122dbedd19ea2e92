package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/custos-mcp/custos/app"
	"github.com/custos-mcp/custos/audit"
	"github.com/custos-mcp/custos/audit/checkpoint"
	"github.com/custos-mcp/custos/server"
	"github.com/custos-mcp/custos/store"
	"github.com/custos-mcp/custos/store/synth"
)

func newDemoCmd() *cobra.Command {
	var (
		keep     bool
		patients int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Seed, serve and exercise a small synthetic data set end to end",
		Long: `demo shows the whole path in under a minute with nothing but Go installed:
it seeds a small synthetic data set in a temporary directory, imports it,
serves it over Streamable HTTP on loopback in dev mode, and drives real MCP
client sessions as a clinician, a biller, a researcher and an outsider:
allowed, minimized and denied reads. Then it verifies the audit log and
prints what happened. Nothing outside the temporary directory is touched.

Example:
  go run ./cmd/custos demo
  custos demo --keep     # keep the data directory to inspect it afterwards`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if patients < 6 || patients > 1000 {
				return usagef("--patients must be between 6 and 1000, got %d", patients)
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), patients, keep, asJSON)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory")
	cmd.Flags().IntVar(&patients, "patients", 12, "synthetic patients to generate")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the transcript as JSON")
	return cmd
}

// demoStep is one scripted request and what came back.
type demoStep struct {
	Persona string `json:"persona"`
	Action  string `json:"action"`
	Target  string `json:"target"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

type demoPersona struct {
	name, file, token string
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, patients int, keep, asJSON bool) error {
	start := time.Now()
	tmp, err := os.MkdirTemp("", "custos-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	say := func(format string, args ...any) {
		if !asJSON {
			fmt.Fprintf(stdout, format+"\n", args...)
		}
	}
	seedDir := filepath.Join(tmp, "synthetic")
	data := dataDir(filepath.Join(tmp, "data"))
	say("custos demo: working in %s", tmp)

	sum, err := synth.Generate(ctx, seedDir, synth.Options{Patients: patients, Seed: 1})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	say("  seeded %d synthetic patients, %d resources", sum.Patients, sum.Resources)
	if err := os.MkdirAll(string(data), 0o700); err != nil {
		return err
	}
	// The demo imports the seed's FHIR Bulk export, as a hospital's data
	// arrives: keyed opaque URIs, notes as attachments lifted out of their
	// DocumentReferences, labels from meta.security.
	idKey, err := resourceIDKey(ctx, data, nil)
	if err != nil {
		return err
	}
	rep, err := app.ImportFHIR(ctx, data.catalog(), filepath.Join(seedDir, "bulk"), app.FHIRImport{Tenant: synth.DefaultTenant, IDKey: idKey})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	say("  imported the seed's FHIR Bulk export: %d catalog entries into %s", rep.Created, data.catalog())

	// Serve over loopback HTTP with fresh dev tokens for each persona.
	personas := []*demoPersona{
		{name: "clinician", file: "clinician.json"},
		{name: "biller", file: "billing.json"},
		{name: "researcher", file: "researcher.json"},
		{name: "outsider", file: "outsider.json"},
	}
	var tf server.TokenFile
	for _, p := range personas {
		raw, err := os.ReadFile(filepath.Join(seedDir, "principals", p.file))
		if err != nil {
			return err
		}
		p.token = randomToken()
		tf.Tokens = append(tf.Tokens, server.TokenEntry{TokenSHA256: server.HashToken(p.token), Principal: json.RawMessage(compactJSON(raw))})
	}
	tfBytes, _ := json.Marshal(tf)
	tokens, err := server.ParseTokenFile(tfBytes)
	if err != nil {
		return err
	}
	a, err := app.Open(ctx, app.Options{
		DataDir: string(data), Dev: true, Node: "demo", Version: version,
		HTTP: &app.HTTPOptions{Listen: "127.0.0.1:0", Tokens: tokens},
	})
	if err != nil {
		return err
	}
	defer a.Close()
	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx) }()
	endpoint := a.URL()
	say("  serving %s (dev mode: ephemeral keys, records marked dev=true)\n", endpoint)

	targets, err := demoTargets(seedDir, data)
	if err != nil {
		return err
	}
	script := map[string][]string{
		"clinician":  {targets["patient"], targets["note"], targets["hiv"]},
		"biller":     {targets["coverage"], targets["note"]},
		"researcher": {targets["patient"], targets["note"]},
		"outsider":   {targets["patient"], targets["missing"]},
	}
	var steps []demoStep
	for _, p := range personas {
		s, err := demoSession(ctx, endpoint, p, script[p.name])
		if err != nil {
			return fmt.Errorf("%s session: %w", p.name, err)
		}
		steps = append(steps, s...)
	}
	stopServing()
	if err := <-served; err != nil {
		return err
	}
	if err := a.Close(); err != nil {
		return err
	}

	var problems []audit.Problem
	vs, err := audit.VerifyFile(ctx, data.audit(), func(p audit.Problem) { problems = append(problems, p) })
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, map[string]any{
			"steps": steps, "audit": map[string]any{"records": vs.Records, "head_hash": vs.HeadHash, "problems": len(problems)},
			"elapsed_ms": time.Since(start).Milliseconds(), "data_dir": tmp, "kept": keep,
		})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PERSONA\tACTION\tTARGET\tOUTCOME\tDETAIL")
	for _, s := range steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Persona, s.Action, s.Target, s.Outcome, s.Detail)
	}
	tw.Flush()
	say("")
	if len(problems) > 0 {
		return fmt.Errorf("audit log verification FAILED: %d problem(s)", len(problems))
	}
	say("audit log: %d records, hash chain and Merkle tree verified (head %s…)", vs.Records, vs.HeadHash[:16])
	if e, ok, err := (&checkpoint.Anchor{Dir: string(data)}).Latest(); err == nil && ok {
		say("signed checkpoint: tree size %d, root %s… (the audit log's tamper-evident commitment)", e.Size, e.Root.String()[:16])
	}
	say("patients appear in the audit log only as keyed hashes; every request above was decided by policy")
	say("and durably audited before any data was returned.")
	if keep {
		say("kept %s — try:", tmp)
		say("  custos audit report --data-dir %s --dev --purpose HOPERAT --denials", data)
		say("  custos audit pubkey --data-dir %s --dev -o demo.vkeys && custos audit export --data-dir %s --purpose HOPERAT --out demo-bundle \\", data, data)
		say("    && custos audit verify --bundle demo-bundle --pubkey demo.vkeys")
	}
	say("done in %.1fs", time.Since(start).Seconds())
	return nil
}

// demoTargets picks the URIs the script reads, from the seeded catalog: the
// first patient the clinician cares for, and that patient's resources.
func demoTargets(seedDir string, data dataDir) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(seedDir, "principals", "clinician.json"))
	if err != nil {
		return nil, err
	}
	var clin struct {
		Patients []string `json:"patients"`
	}
	if err := json.Unmarshal(raw, &clin); err != nil || len(clin.Patients) == 0 {
		return nil, errors.New("demo: clinician principal has no patients")
	}
	st, err := store.Open(data.catalog(), store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	want := clin.Patients[0]
	t := map[string]string{}
	after := ""
	for {
		page, err := st.Page(after, 500)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			after = r.URI
			if r.Labels.Patient == want {
				kind := r.Labels.Type
				if kind == store.TypeAttachment && strings.HasPrefix(r.MIMEType, "text/") {
					kind = "note" // a clinical note lifted out of its DocumentReference
				}
				if _, ok := t[kind]; !ok {
					t[kind] = r.URI
				}
			}
			if contains(r.Labels.Sensitivity, "hiv") && t["hiv"] == "" {
				t["hiv"] = r.URI
			}
		}
	}
	for _, k := range []string{"patient", "note", "coverage", "hiv"} {
		if t[k] == "" {
			return nil, fmt.Errorf("demo: seeded data has no %s resource to read", k)
		}
	}
	u, _ := store.ParseURI(t["patient"])
	u.ID = "00000000-0000-4000-8000-000000000000"
	t["missing"] = u.String()
	return t, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// bearer adds the Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func demoSession(ctx context.Context, endpoint string, p *demoPersona, reads []string) ([]demoStep, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "custos-demo-" + p.name, Version: version}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer{token: p.token, next: http.DefaultTransport}, Timeout: 30 * time.Second},
	}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	var steps []demoStep
	n, pages := 0, 0
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		_ = r
		n++
	}
	pages = max((n+server.DefaultPageSize-1)/server.DefaultPageSize, 1)
	detail := fmt.Sprintf("%d visible resources (~%d pages)", n, pages)
	if pages == 1 {
		detail = fmt.Sprintf("%d visible resources (1 page)", n)
	}
	steps = append(steps, demoStep{Persona: p.name, Action: "list", Target: "all resources", Outcome: "allowed",
		Detail: detail})
	for _, uri := range reads {
		step := demoStep{Persona: p.name, Action: "read", Target: shortURI(uri)}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			step.Outcome = "refused"
			step.Detail = fmt.Sprintf("error %d %q (denied and not-found look alike)", rpcErr.Code, rpcErr.Message)
		case err != nil:
			return nil, err
		default:
			step.Outcome, step.Detail = describeRead(res)
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// describeRead summarizes a read result without printing PHI.
func describeRead(res *mcp.ReadResourceResult) (string, string) {
	if len(res.Contents) == 0 {
		return "allowed", "empty"
	}
	c := res.Contents[0]
	if len(c.Blob) > 0 {
		return "allowed", fmt.Sprintf("%s, %d bytes", c.MIMEType, len(c.Blob))
	}
	if _, ok := c.Meta["etag"]; ok {
		return "allowed", fmt.Sprintf("%s, %d bytes, full record", c.MIMEType, len(c.Text))
	}
	var fields []string
	var doc map[string]any
	if json.Unmarshal([]byte(c.Text), &doc) == nil {
		if _, ok := doc["name"]; !ok && doc["resourceType"] == "Patient" {
			fields = append(fields, "name removed")
		}
		if bd, ok := doc["birthDate"].(string); ok && (len(bd) <= 4 || bd == "90+") {
			fields = append(fields, "birthDate→"+bd)
		}
		if _, ok := doc["identifier"]; !ok {
			fields = append(fields, "identifiers removed")
		}
		if sid, ok := doc["subscriberId"].(string); ok && strings.HasPrefix(sid, "***") {
			fields = append(fields, "subscriberId masked")
		}
	}
	return "minimized", fmt.Sprintf("%s, %d bytes: %s", c.MIMEType, len(c.Text), strings.Join(fields, ", "))
}

// shortURI keeps the scheme, type and the start of the id: enough to tell
// reads apart in a summary.
func shortURI(uri string) string {
	u, err := store.ParseURI(uri)
	if err != nil {
		return "(invalid)"
	}
	return fmt.Sprintf("%s %s/%s…", u.Scheme, u.Type, u.ID[:8])
}
