package policy

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	custosrego "github.com/custos-mcp/custos/rego"
)

// writePolicy writes files (path -> content) into a fresh directory.
func writePolicy(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadPolicy(t *testing.T, body string) *Engine {
	t.Helper()
	dir := writePolicy(t, map[string]string{"authz.rego": "package custos.authz\n\n" + body + "\n"})
	// A generous timeout: these tests are about other failures, and the
	// machine running them may be loaded.
	e, err := LoadDir(context.Background(), dir, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	return e
}

func TestDecideFailsClosed(t *testing.T) {
	read := Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}
	tests := []struct {
		name   string
		policy string
		want   error
		reason string
	}{
		{"strict builtin error", `decision := {"allow": to_number("x") > 0, "reasons": [], "obligations": []}`,
			ErrEvaluation, "policy_error"},
		{"builtin error on input", `decision := {"allow": to_number(input.principal.sub) > 0}`,
			ErrEvaluation, "policy_error"},
		{"conflict", "decision := {\"allow\": true} if input.action == \"read\"\ndecision := {\"allow\": false} if input.principal.sub != \"\"",
			ErrEvaluation, "policy_error"},
		{"undefined", `decision := {"allow": true} if input.action == "never"`,
			ErrUndefined, "policy_undefined"},
		{"allow is a string", `decision := {"allow": "true", "reasons": [], "obligations": []}`,
			ErrBadShape, "policy_bad_shape"},
		{"allow missing", `decision := {"reasons": ["ok"]}`,
			ErrBadShape, "policy_bad_shape"},
		{"decision not an object", `decision := true`,
			ErrBadShape, "policy_bad_shape"},
		{"reasons not strings", `decision := {"allow": true, "reasons": [1], "obligations": []}`,
			ErrBadShape, "policy_bad_shape"},
		{"reasons not an array", `decision := {"allow": true, "reasons": "ok"}`,
			ErrBadShape, "policy_bad_shape"},
		{"obligations not an array", `decision := {"allow": true, "obligations": {"op": "remove", "path": "/name"}}`,
			ErrBadShape, "policy_bad_shape"},
		{"obligation not an object", `decision := {"allow": true, "obligations": ["remove:/name"]}`,
			ErrBadShape, "policy_bad_shape"},
		{"obligation path not a string", `decision := {"allow": true, "obligations": [{"op": "remove", "path": 3}]}`,
			ErrBadShape, "policy_bad_shape"},
		{"obligation without op", `decision := {"allow": true, "obligations": [{"path": "/name"}]}`,
			ErrBadShape, "policy_bad_shape"},
		{"unknown op", `decision := {"allow": true, "reasons": [], "obligations": [{"op": "encrypt", "path": "/name"}]}`,
			ErrBadObligation, "unknown_obligation"},
		{"unknown fn", `decision := {"allow": true, "obligations": [{"op": "generalize", "path": "/birthDate", "fn": "decade"}]}`,
			ErrBadObligation, "unknown_obligation"},
		{"bad path", `decision := {"allow": true, "obligations": [{"op": "remove", "path": "name"}]}`,
			ErrBadObligation, "unknown_obligation"},
		{"unknown obligation key", `decision := {"allow": true, "obligations": [{"op": "remove", "path": "/name", "unless": "vip"}]}`,
			ErrBadObligation, "unknown_obligation"},
		{"bad obligation on a deny", `decision := {"allow": false, "obligations": [{"op": "encrypt", "path": "/name"}]}`,
			ErrBadObligation, "unknown_obligation"},
		// A key the engine does not know may hold obligations it would
		// otherwise skip, releasing the payload unminimized.
		{"misspelt obligations key", `decision := {"allow": true, "reasons": ["research"], "obligation": [{"op": "deidentify", "fn": "safeharbor"}]}`,
			ErrBadShape, "policy_bad_shape"},
		{"capitalised obligations key", `decision := {"allow": true, "reasons": ["research"], "obligations": [], "Obligations": [{"op": "remove", "path": "/name"}]}`,
			ErrBadShape, "policy_bad_shape"},
		{"obligations of a vocabulary of its own", `decision := {"allow": true, "reasons": ["ok"], "redact": ["/name"]}`,
			ErrBadShape, "policy_bad_shape"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := loadPolicy(t, tc.policy)
			d, err := e.Decide(context.Background(), read)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			checkDenied(t, e, d, tc.reason)
			if strings.Contains(err.Error(), patientA) || strings.Contains(err.Error(), clinician.Sub) {
				t.Errorf("error leaks input values: %v", err)
			}
		})
	}
}

func TestDecideWellFormedCustomPolicy(t *testing.T) {
	// The control for TestDecideFailsClosed: a correct custom policy allows,
	// "reasons" may be absent, and a deny without reasons gets the generic
	// "denied" reason. (An extra key is a bad shape: see the table above.)
	e := loadPolicy(t, `decision := {"allow": input.action == "read", "obligations": [{"op": "mask", "path": "/ssn", "fn": "last4"}, {"op": "scrub", "path": ""}]}`)
	d, err := e.Decide(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("note", patientA)})
	if err != nil || !d.Allow || len(d.Obligations) != 2 || d.Obligations[0].String() != "mask:/ssn:last4" || d.Obligations[1].String() != "scrub:" {
		t.Fatalf("Decide = %+v, %v; want allow with 2 obligations", d, err)
	}
	d, err = e.Decide(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionList, Resource: resource("note", patientA)})
	if err != nil || d.Allow || d.Obligations != nil || len(d.Reasons) != 1 || d.Reasons[0] != "denied" {
		t.Fatalf("Decide = %+v, %v; want deny with reason denied and no obligations", d, err)
	}
}

func TestDecideTimeout(t *testing.T) {
	// A policy that takes far longer than the 1ms timeout: a comprehension
	// over a 4M-element product.
	dir := writePolicy(t, map[string]string{"authz.rego": `package custos.authz

decision := {"allow": count(pairs) > 0}

pairs := {[i, j] | some i in numbers.range(1, 2000); some j in numbers.range(1, 2000)}
`})
	e, err := LoadDir(context.Background(), dir, Options{Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionTemplates})
	if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrEvaluation and DeadlineExceeded", err)
	}
	checkDenied(t, e, d, "policy_timeout")
}

func TestDecideCancelled(t *testing.T) {
	e := mustDefault(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := e.Decide(ctx, Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)})
	if !errors.Is(err, ErrEvaluation) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrEvaluation and Canceled", err)
	}
	checkDenied(t, e, d, "policy_error")
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // substring of the error
	}{
		{"http.send", map[string]string{"authz.rego": "package custos.authz\n\ndecision := {\"allow\": http.send({\"method\": \"get\", \"url\": \"http://example.com\"}).status_code == 200}\n"}, "authz.rego:3"},
		{"net.lookup_ip_addr", map[string]string{"authz.rego": "package custos.authz\n\ndecision := {\"allow\": count(net.lookup_ip_addr(\"example.com\")) > 0}\n"}, "authz.rego:3"},
		{"opa.runtime", map[string]string{"authz.rego": "package custos.authz\n\ndecision := {\"allow\": opa.runtime().env.X == \"1\"}\n"}, "authz.rego:3"},
		{"syntax error", map[string]string{"p/authz.rego": "package custos.authz\n\ndecision := {\"allow\": \n"}, "p/authz.rego:"},
		{"type error", map[string]string{"authz.rego": "package custos.authz\n\ndecision := {\"allow\": true}\n\nx := 1 + \"a\"\n"}, "authz.rego:5"},
		{"rego v0 syntax", map[string]string{"authz.rego": "package custos.authz\n\ndecision = {\"allow\": true} { true }\n"}, "authz.rego:3"},
		{"no decision rule", map[string]string{"authz.rego": "package custos.authz\n\nallow := true\n"}, "no rule"},
		{"wrong package", map[string]string{"authz.rego": "package custos.other\n\ndecision := {\"allow\": true}\n"}, "no rule"},
		{"only tests", map[string]string{"authz_test.rego": "package custos.authz\n\ndecision := {\"allow\": true}\n"}, "no .rego"},
		{"empty", map[string]string{"README.md": "nothing here"}, "no .rego"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadDir(context.Background(), writePolicy(t, tc.files), Options{})
			if !errors.Is(err, ErrCompile) {
				t.Fatalf("err = %v, want ErrCompile", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := LoadDir(context.Background(), filepath.Join(t.TempDir(), "missing"), Options{}); !errors.Is(err, ErrCompile) {
		t.Errorf("missing dir: err = %v, want ErrCompile", err)
	}
	if _, err := Default(context.Background(), Options{Timeout: -1}); err == nil {
		t.Error("negative timeout: want error")
	}
}

func TestRevision(t *testing.T) {
	ctx := context.Background()
	policy := "package custos.authz\n\ndecision := {\"allow\": false}\n"
	helper := "package custos.helpers\n\nx := 1\n"
	a, err := Load(ctx, fstest.MapFS{"a.rego": {Data: []byte(policy)}, "b/h.rego": {Data: []byte(helper)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Same modules, different test file and non-rego file: same revision.
	b, err := Load(ctx, fstest.MapFS{"a.rego": {Data: []byte(policy)}, "b/h.rego": {Data: []byte(helper)},
		"a_test.rego": {Data: []byte("package x\n")}, "README": {Data: []byte("x")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Revision() != b.Revision() {
		t.Errorf("revision depends on tests or non-rego files: %s vs %s", a.Revision(), b.Revision())
	}
	// Golden value, computed independently with
	// printf 'a.rego\0<policy>\0b/h.rego\0<helper>\0' | sha256sum
	const golden = "sha256:73644e91fbe93cb56649c8d60aaa25b70d030c0ad4074e3dc223047d5432d4d4"
	if a.Revision() != golden {
		t.Errorf("Revision = %s, want %s", a.Revision(), golden)
	}
	// Renaming a file or changing a byte changes the revision.
	c, err := Load(ctx, fstest.MapFS{"c.rego": {Data: []byte(policy)}, "b/h.rego": {Data: []byte(helper)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(ctx, fstest.MapFS{"a.rego": {Data: []byte(policy + " ")}, "b/h.rego": {Data: []byte(helper)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Revision() == a.Revision() || d.Revision() == a.Revision() {
		t.Error("revision did not change with file name or content")
	}
	// The embedded default has a stable revision across loads.
	e1 := mustDefault(t)
	e2, err := Default(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := custosrego.FS.ReadFile("custos/authz.rego")
	if e1.Revision() != e2.Revision() || e1.Revision() != revision([]regoFile{{"custos/authz.rego", f}}) {
		t.Errorf("default revision unstable: %s vs %s", e1.Revision(), e2.Revision())
	}
}

// TestLogsCarryNoInputValues runs allowed, denied and failing decisions with
// a debug logger and checks that no input value reaches the log.
func TestLogsCarryNoInputValues(t *testing.T) {
	var buf strings.Builder
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	good, err := Default(ctx, Options{Logger: logger, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := writePolicy(t, map[string]string{"authz.rego": "package custos.authz\n\ndecision := {\"allow\": to_number(input.principal.sub) > 0}\n"})
	bad, err := LoadDir(ctx, dir, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{Sub: "secret-subject-1234", Roles: []string{"clinician"}, Tenant: tenant, Patients: []string{patientA}}
	in := Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientA)}
	for _, e := range []*Engine{good, bad} {
		e.Decide(ctx, in)
		e.Decide(ctx, Input{Principal: p, PurposeOfUse: "TREAT", Action: ActionRead, Resource: resource("observation", patientB)})
		e.Decide(ctx, Input{Principal: p, PurposeOfUse: "TREAT", Action: "x-" + patientA})
	}
	out := buf.String()
	if !strings.Contains(out, "policy decision failed closed") || !strings.Contains(out, `"allow":true`) {
		t.Fatalf("expected decision log lines, got:\n%s", out)
	}
	for _, secret := range []string{p.Sub, patientA[:8], patientB[:8], tenant, "custos://"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains input value %q:\n%s", secret, out)
		}
	}
}

func TestDecideAcceptsSets(t *testing.T) {
	// Sets render as sorted arrays, as they would in OPA's JSON output.
	e := loadPolicy(t, `decision := {"allow": true, "reasons": {"b", "a"}, "obligations": {{"op": "remove", "path": "/z"}, {"op": "remove", "path": "/a"}}}`)
	d, err := e.Decide(context.Background(), Input{Principal: clinician, PurposeOfUse: "TREAT", Action: ActionTemplates})
	if err != nil || !d.Allow || !slices.Equal(d.Reasons, []string{"a", "b"}) || len(d.Obligations) != 2 || d.Obligations[0].Path != "/a" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
}

func TestDefaultTimeoutApplied(t *testing.T) {
	e, err := Default(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.timeout != DefaultTimeout || DefaultTimeout != time.Second {
		t.Fatalf("timeout = %v, want %v", e.timeout, DefaultTimeout)
	}
}
