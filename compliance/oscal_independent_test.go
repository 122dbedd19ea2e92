package compliance

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gjs "github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
)

// loadSchemaIndependently compiles NIST's schema with a second validator
// (github.com/google/jsonschema-go), sharing nothing with loadSchema but the
// file: the schema's plain-name anchors ("$id": "#name", which draft-07
// ignores beside a "$ref") are turned into the JSON pointers of the nodes
// that declare them, instead of loadSchema's allOf rewrite.
func loadSchemaIndependently(t *testing.T) *gjs.Resolved {
	t.Helper()
	raw := readSchema(t)
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	anchors := map[string]string{}
	var find func(v any, ptr string)
	find = func(v any, ptr string) {
		switch n := v.(type) {
		case map[string]any:
			if id, ok := n["$id"].(string); ok && strings.HasPrefix(id, "#") {
				anchors[id] = "#" + ptr
				delete(n, "$id")
			}
			for k, c := range n {
				find(c, ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k))
			}
		case []any:
			for i, c := range n {
				find(c, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	find(tree, "")
	eachObject(tree, func(n map[string]any) {
		if ref, ok := n["$ref"].(string); ok && anchors[ref] != "" {
			n["$ref"] = anchors[ref]
		}
	})
	if len(anchors) == 0 {
		t.Fatal("the schema declares no anchor: not the OSCAL schema this test knows")
	}
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var s gjs.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("the OSCAL schema does not resolve: %v", err)
	}
	return rs
}

func definitionTree(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(DefinitionJSON(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDefinitionIsValidOSCALToASecondValidator: the shipped document is
// valid OSCAL 1.0.6 to a validator other than the one
// TestDefinitionIsValidOSCAL uses, and that validator rejects the mistakes
// an author makes: the print form of a control id, a time without offset,
// a uuid that is not v4 or v5.
func TestDefinitionIsValidOSCALToASecondValidator(t *testing.T) {
	rs := loadSchemaIndependently(t)
	if err := rs.Validate(definitionTree(t)); err != nil {
		t.Fatalf("component-definition.json is not valid OSCAL 1.0.6 (google/jsonschema-go):\n%v", err)
	}
	md := func(m map[string]any) map[string]any {
		return m["component-definition"].(map[string]any)["metadata"].(map[string]any)
	}
	for name, mutate := range map[string]func(m map[string]any){
		"control id in print form AU-9(3)": func(m map[string]any) { req(m)["control-id"] = "AU-9(3)" },
		"last-modified without offset":     func(m map[string]any) { md(m)["last-modified"] = "2026-11-25T00:00:00" },
		"uuid version 1": func(m map[string]any) {
			m["component-definition"].(map[string]any)["uuid"] = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
		},
		"prop name with a space": func(m map[string]any) {
			req(m)["props"].([]any)[0].(map[string]any)["name"] = "evidence test"
		},
		"no title": func(m map[string]any) { delete(md(m), "title") },
	} {
		m := definitionTree(t)
		mutate(m)
		if rs.Validate(m) == nil {
			t.Errorf("%s: accepted by the second validator", name)
		}
	}
}

// nistID is an SP 800-53 rev5 control id in OSCAL form: the family in
// lower case, the control number, and an enhancement after a dot
// ("au-9.3", never "AU-9(3)" or "au-09").
var nistID = regexp.MustCompile(`^(ac|at|au|ca|cm|cp|ia|ir|ma|mp|pe|pl|pm|ps|pt|ra|sa|sc|si|sr)-[1-9][0-9]*(\.[1-9][0-9]*)?$`)

// hipaaCitation is the 45 CFR citation a HIPAA control's title ends with.
var hipaaCitation = regexp.MustCompile(`\(45 CFR (16[0-9]\.[0-9]+)((?:\([0-9a-zA-Z]+\))*)`)

// TestDefinitionIdentifiers checks what no schema checks: every uuid is a
// v4 or v5 uuid and unique, last-modified is RFC 3339 with an offset, NIST
// control ids are in OSCAL form for a rev5 family, a HIPAA control's id is
// the citation in its title, and custos's properties are in its namespace.
func TestDefinitionIdentifiers(t *testing.T) {
	for _, p := range identifierProblems(definitionTree(t)) {
		t.Error(p)
	}
	// The checks can fail.
	m := definitionTree(t)
	req(m)["control-id"] = "hipaa-164.308-a-1-ii"
	m["component-definition"].(map[string]any)["metadata"].(map[string]any)["last-modified"] = "2026-11-25"
	impls := m["component-definition"].(map[string]any)["components"].([]any)[0].(map[string]any)["control-implementations"].([]any)
	reqs := impls[len(impls)-1].(map[string]any)["implemented-requirements"].([]any)
	last := reqs[len(reqs)-1].(map[string]any)
	last["control-id"] = "SI-7"
	last["uuid"] = req(m)["uuid"]
	if ps := identifierProblems(m); len(ps) != 4 {
		t.Errorf("a damaged definition: %d problems, want 4 (hipaa id, last-modified, NIST id, duplicate uuid): %q", len(ps), ps)
	}
}

func identifierProblems(m map[string]any) []string {
	var out []string
	seen := map[string]string{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch n := v.(type) {
		case map[string]any:
			if s, ok := n["uuid"].(string); ok {
				u, err := uuid.Parse(s)
				switch {
				case err != nil || u.Variant() != uuid.RFC4122 || (u.Version() != 4 && u.Version() != 5):
					out = append(out, path+": uuid "+s+" is not an RFC 4122 v4 or v5 uuid")
				case seen[strings.ToLower(s)] != "":
					out = append(out, path+": uuid "+s+" is also the uuid of "+seen[strings.ToLower(s)])
				default:
					seen[strings.ToLower(s)] = path
				}
			}
			if ns, ok := n["ns"].(string); ok && ns != Namespace {
				out = append(out, path+": property namespace "+ns+", want "+Namespace)
			}
			for k, c := range n {
				walk(c, path+"/"+k)
			}
		case []any:
			for i, c := range n {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(m, "")
	cd := m["component-definition"].(map[string]any)
	lm, _ := cd["metadata"].(map[string]any)["last-modified"].(string)
	if _, err := time.Parse(time.RFC3339, lm); err != nil || !regexp.MustCompile(`(Z|[+-]\d\d:\d\d)$`).MatchString(lm) {
		out = append(out, "metadata.last-modified "+strconv.Quote(lm)+" is not RFC 3339 with an offset")
	}
	for _, c := range cd["components"].([]any) {
		for _, ci := range c.(map[string]any)["control-implementations"].([]any) {
			src := ci.(map[string]any)["source"].(string)
			for _, r := range ci.(map[string]any)["implemented-requirements"].([]any) {
				r := r.(map[string]any)
				id := r["control-id"].(string)
				title := ""
				for _, p := range r["props"].([]any) {
					if p.(map[string]any)["name"] == "control-title" {
						title = p.(map[string]any)["value"].(string)
					}
				}
				switch {
				case strings.Contains(src, "SP800-53/rev5"):
					if !nistID.MatchString(id) {
						out = append(out, "control "+id+" of "+src+" is not an SP 800-53 rev5 id in OSCAL form (au-9.3)")
					}
				case strings.Contains(src, "part-164"):
					cm := hipaaCitation.FindStringSubmatch(title)
					if cm == nil {
						out = append(out, "control "+id+": its title "+strconv.Quote(title)+" cites no 45 CFR paragraph")
						continue
					}
					parts := regexp.MustCompile(`\(([^)]+)\)`).FindAllStringSubmatch(cm[2], -1)
					if strings.HasPrefix(title[strings.Index(title, cm[0])+len(cm[0]):], "-(") && len(parts) > 0 {
						parts = parts[:len(parts)-1] // a range, (e)(2)(i)-(ii): the id is the paragraph holding it
					}
					want := "hipaa-" + cm[1]
					for _, part := range parts {
						want += "-" + strings.ToLower(part[1])
					}
					if id != want {
						out = append(out, "control "+id+": its title cites "+strings.TrimPrefix(cm[0], "(")+", whose id is "+want)
					}
				default:
					out = append(out, "control "+id+": unknown catalog "+src)
				}
			}
		}
	}
	return out
}
