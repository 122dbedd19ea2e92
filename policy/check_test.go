package policy

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
)

func TestRunTestsCoverage(t *testing.T) {
	fsys := fstest.MapFS{
		"p/authz.rego": {Data: []byte("package custos.authz\n\ndefault decision := {\"allow\": false}\n\ndecision := {\"allow\": true} if input.action == \"templates\"\n\nunused if input.x == 1\n")},
		"p/authz_test.rego": {Data: []byte("package custos.authz_test\n\nimport data.custos.authz\n\n" +
			"test_templates if authz.decision.allow with input as {\"action\": \"templates\"}\n\n" +
			"test_wrong if authz.decision.allow with input as {\"action\": \"read\"}\n")},
	}
	rep, err := RunTestsCoverage(context.Background(), fsys)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 1 || rep.Failed != 1 || len(rep.Results) != 2 {
		t.Fatalf("passed %d failed %d: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	if r := rep.Results[1]; r.Name != "test_wrong" || r.Outcome != "FAIL" || !strings.HasPrefix(r.Location, "p/authz_test.rego:") {
		t.Errorf("second result %+v", r)
	}
	// The rule "unused" is never evaluated: coverage is below 100% and
	// counts the policy module only.
	if rep.Coverage <= 0 || rep.Coverage >= 100 || len(rep.Files) != 1 {
		t.Errorf("coverage %.1f%% over %v", rep.Coverage, rep.Files)
	}
	if _, err := RunTestsCoverage(context.Background(), fstest.MapFS{"a.rego": fsys["p/authz.rego"]}); err == nil {
		t.Error("a policy without tests passed")
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	good, err := Load(ctx, fstest.MapFS{"a.rego": {Data: []byte("package custos.authz\n\ndefault decision := {\"allow\": false, \"reasons\": [\"no\"]}\n\ndecision := {\"allow\": true, \"obligations\": [{\"op\": \"remove\", \"path\": \"/text\"}]} if input.purpose_of_use == \"HPAYMT\"\n")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := Load(ctx, fstest.MapFS{"a.rego": {Data: []byte("package custos.authz\n\ndefault decision := {\"allow\": false}\n\ndecision := {\"allow\": 1} if input.purpose_of_use == \"HRESCH\"\n")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Check(ctx, good) {
		if !r.OK {
			t.Errorf("good policy: %s: %s", r.Example, r.Error)
		}
		if strings.HasPrefix(r.Example, "billing") && (!r.Allow || len(r.Obligations) != 1 || r.Obligations[0] != "remove:/text") {
			t.Errorf("billing example: %+v", r)
		}
	}
	var failed []string
	for _, r := range Check(ctx, bad) {
		if !r.OK {
			failed = append(failed, r.Example)
			if !strings.Contains(r.Error, "wrong shape") {
				t.Errorf("%s: %s", r.Example, r.Error)
			}
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "researcher") {
		t.Errorf("bad policy failed %v, want the researcher example", failed)
	}
}
