package policy

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	custosrego "github.com/custos-mcp/custos/rego"
)

func TestRegoUnitTests(t *testing.T) {
	sum, err := RunTests(context.Background(), custosrego.FS)
	if err != nil {
		t.Fatalf("RunTests: %v", err)
	}
	for _, f := range sum.Failures {
		t.Error(f)
	}
	if sum.Passed == 0 {
		t.Fatal("no Rego tests ran")
	}
	t.Logf("%d Rego tests passed, %d failed", sum.Passed, sum.Failed)
}

// TestRegoUnitTestsDetectMutations proves the Rego tests can fail: each
// mutation of the default policy must make at least one of them fail.
func TestRegoUnitTestsDetectMutations(t *testing.T) {
	orig, err := fs.ReadFile(custosrego.FS, "custos/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := fs.ReadFile(custosrego.FS, "custos/authz_test.rego")
	if err != nil {
		t.Fatal(err)
	}
	mutations := []struct{ name, old, new string }{
		{"hiv needs no role", `"hiv": "sensitive:hiv"`, `"hiv": ""`},
		{"opt-out ignored", `not input.purpose_of_use in {"TREAT", "ETREAT"}`, `input.purpose_of_use == "NEVER"`},
		{"auditor reads", `contains "auditor_no_phi_access" if input.principal.roles[_] == "auditor"`, `contains "auditor_no_phi_access" if false`},
		{"no subscriberId mask", `{"op": "mask", "path": "/subscriberId", "fn": "last4"},`, ``},
		{"no class value mask", `{"op": "mask", "path": "/class/*/value", "fn": "last4"},`, ``},
		{"no research de-identification", `research_deidentify := [{"op": "deidentify", "path": "", "fn": "safeharbor"}]`, `research_deidentify := []`},
		{"any tenant", `not tenant in principal_tenants`, `false`},
		{"any patient", `r.patient in care_relationship_patients,`, `true,`},
		{"no vip flag", `array.concat(g.reasons, ["vip_patient"])`, `g.reasons`},
		{"break-glass without grant", `bg.grant != ""`, `true`},
		{"break-glass for any patient", `r.patient == object.get(item, ["break_glass", "patient"], null),`, `true,`},
		{"list differs from read", `decision := resource_decision if input.action in {"list", "read"}`,
			"decision := resource_decision if input.action == \"read\"\ndecision := {\"allow\": true, \"reasons\": [], \"obligations\": []} if input.action == \"list\""},
		{"unknown purpose allowed", `not input.purpose_of_use in known_purposes`, `false`},
		{"negated membership on missing roles", `not has_role(needed)`, `not needed in input.principal.roles`},
		{"billing any type", `"obligations": billing_obligations[typ]}`, `"obligations": object.get(billing_obligations, typ, [])}`},
		{"batch differs from single", `decisions := resource_decisions(input.items) if`,
			`decisions := [decision | some _ in input.items] if`},
		// An empty patient makes a resource tenant-level (decided by
		// reference_grant), so the care team's "" filter below it is
		// defence in depth no test can reach; the mutation targets the
		// tenant-level feature instead.
		{"tenant-level decided by the care grant", "request_denies, true, r.type, r.tenant, r.patient == \"\",\n\tr.patient in care_relationship_patients,", "request_denies, true, r.type, r.tenant, false,\n\tr.patient in care_relationship_patients,"},
		{"researcher reads notes", `"familymemberhistory", "imagingstudy", "specimen",`, `"familymemberhistory", "imagingstudy", "specimen", "note",`},
		{"researcher reads attachments", `"familymemberhistory", "imagingstudy", "specimen",`, `"familymemberhistory", "imagingstudy", "specimen", "attachment",`},
		{"reference data of any type", `reference_type(typ) if typ in reference_types`, `reference_type(typ) if typ`},
		{"reference data for research undeidentified", `reference_grant("research", typ, sens) := {"reasons": ["research_deidentified"], "obligations": research_deidentify}`, `reference_grant("research", typ, sens) := {"reasons": ["research_deidentified"], "obligations": []}`},
		{"a patient's home is reference data", `residence(sens) if "residence" in sens`, `residence(sens) if false`},
		{"a patient's home is reference data for research", "\treference_type(typ)\n\tnot residence(sens)\n}\n\nreference_type", "\treference_type(typ)\n}\n\nreference_type"},
		{"billing keeps a code's text", `billing_concept(path) := billing_coding(concat("", [path, "/coding/*"]))`, `billing_concept(path) := [path]`},
		{"billing keeps a coding's display", `billing_coding_members := ["system", "version", "code"]`, `billing_coding_members := ["system", "version", "code", "display"]`},
		{"billing class name unscrubbed", `{"op": "scrub", "path": "/class/*/name"},`, ``},
		{"restricted for secondary use", `treatment_mode if grant_mode in {"care", "break_glass"}`, `treatment_mode if true`},
		{"eth needs no role", `"eth": "sensitive:sud"`, `"eth": ""`},
		{"sensitive roles never checked", ` | {code | some label in sens; code := label_role_deny(label)}`, ``},
		{"very-restricted needs no role", `"very-restricted": "sensitive:very-restricted"`, `"very-restricted": ""`},
		{"unknown fhir type known", `known_type(typ) if typ in document_types`, `known_type(typ) if typ in document_types | {"widget"}`},
		{"empty purpose accepted", `purpose_missing if input.purpose_of_use == ""`, `purpose_missing if false`},
		{"nothing visible never for request denies", `nothing_visible if count(request_denies) > 0`, `nothing_visible if false`},
		{"nothing visible never for auditors", `nothing_visible if count(principal_denies) > 0`, `nothing_visible if false`},
		{"nothing visible never without tenant", `nothing_visible if count(principal_tenants) == 0`, `nothing_visible if false`},
		{"nothing visible never without grant mode", `nothing_visible if not grant_mode`, `nothing_visible if false`},
		{"nothing visible to everyone", `nothing_visible if not grant_mode`, `nothing_visible if true`},
		// class_denies answers a resource with nothing to
		// deny without building the deny sets; each of its checks must matter.
		{"no-deny shortcut skips the tenant", "\thas_res == true\n\ttenant in principal_tenants\n", "\thas_res == true\n"},
		{"no-deny shortcut skips the type", "\ttenant in principal_tenants\n\tknown_type(typ)\n", "\ttenant in principal_tenants\n"},
		{"no-deny shortcut skips the labels", "\tsens == []\n", ""},
		{"no-deny shortcut skips the consent flags", "\tconsent == []\n", ""},
		{"nothing visible reads the resource", `default nothing_visible := false`, "default nothing_visible := false\n\nnothing_visible if input.resource.type == \"note\""},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(string(orig), m.old) {
				t.Fatalf("mutation target %q not in authz.rego", m.old)
			}
			// One failing test is the answer: stop there.
			sum, err := runTests(context.Background(),
				[]regoFile{{path: "custos/authz.rego", content: []byte(strings.Replace(string(orig), m.old, m.new, 1))}},
				[]regoFile{{path: "custos/authz_test.rego", content: tests}}, true)
			if err != nil {
				t.Fatalf("runTests: %v", err)
			}
			if sum.Failed == 0 {
				t.Errorf("mutation survived: all %d Rego tests passed", sum.Passed)
			}
		})
	}
}

func TestRunTestsNoTests(t *testing.T) {
	fsys := fstest.MapFS{"p/authz.rego": {Data: []byte("package custos.authz\n\ndecision := {\"allow\": false}\n")}}
	if _, err := RunTests(context.Background(), fsys); err == nil {
		t.Fatal("RunTests with no test files: want error")
	}
	fsys["p/authz_test.rego"] = &fstest.MapFile{Data: []byte("package custos.authz_test\n\nx := 1\n")}
	if _, err := RunTests(context.Background(), fsys); err == nil {
		t.Fatal("RunTests with no test rules: want error")
	}
	fsys["p/authz_test.rego"] = &fstest.MapFile{Data: []byte("package custos.authz_test\n\nimport data.custos.authz\n\ntest_allows if authz.decision.allow\n")}
	sum, err := RunTests(context.Background(), fsys)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 1 || sum.Passed != 0 || len(sum.Failures) != 1 || !strings.Contains(sum.Failures[0], "test_allows") {
		t.Fatalf("summary = %+v, want one failure of test_allows", sum)
	}
}

// runTests with firstFailure reports the first failing test only; without,
// every one.
func TestRunTestsFirstFailure(t *testing.T) {
	policies := []regoFile{{path: "p/authz.rego", content: []byte("package custos.authz\n\ndecision := {\"allow\": false}\n")}}
	tests := []regoFile{{path: "p/authz_test.rego", content: []byte("package custos.authz_test\n\nimport data.custos.authz\n\n" +
		"test_a if authz.decision.allow\ntest_b if authz.decision.allow\ntest_c if authz.decision.allow\ntest_d if not authz.decision.allow\n")}}
	for first, want := range map[bool]int{true: 1, false: 3} {
		sum, err := runTests(context.Background(), policies, tests, first)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Failed != want || len(sum.Failures) != want {
			t.Errorf("firstFailure=%v: %+v, want %d failures", first, sum, want)
		}
	}
}
