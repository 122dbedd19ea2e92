package minimize

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
)

const allowDoc = `{
  "resourceType": "Patient",
  "id": "pat-0001",
  "gender": "female",
  "birthDate": "1986-02-10",
  "name": [{"family": "Doe", "given": ["Jane"]}],
  "address": [
    {"line": ["1 Main St"], "city": "Cambridge", "state": "MA", "postalCode": "02139"},
    {"city": "Ashland", "state": "NH", "postalCode": "03601", "period": {"start": "2020-01-01"}}
  ],
  "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4"}], "text": "A1c"},
  "a/b": 1, "m~n": 2, "*": 3,
  "contained": [{"resourceType": "Practitioner", "id": "pr1", "name": [{"family": "Who"}], "gender": "male"}],
  "flags": [true, false],
  "nested": {"x": {"y": 1, "z": 2}, "w": 3}
}`

func TestAllow(t *testing.T) {
	tests := []struct {
		name string
		ob   Obligation
		want string
	}{
		{"top-level members and resourceType",
			Obligation{Op: OpAllow, Fn: "/gender,/birthDate"},
			`{"resourceType": "Patient", "gender": "female", "birthDate": "1986-02-10"}`},
		{"wildcard into array of objects",
			Obligation{Op: OpAllow, Fn: "/address/*/state,/address/*/postalCode"},
			`{"resourceType": "Patient", "address": [{"state": "MA", "postalCode": "02139"}, {"state": "NH", "postalCode": "03601"}]}`},
		{"whole subtree kept",
			Obligation{Op: OpAllow, Fn: "/code"},
			`{"resourceType": "Patient", "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4"}], "text": "A1c"}}`},
		{"listed parent and child: parent wins",
			Obligation{Op: OpAllow, Fn: "/nested/x/y,/nested"},
			`{"resourceType": "Patient", "nested": {"x": {"y": 1, "z": 2}, "w": 3}}`},
		{"deep member",
			Obligation{Op: OpAllow, Fn: "/nested/x/y"},
			`{"resourceType": "Patient", "nested": {"x": {"y": 1}}}`},
		{"escaped names",
			Obligation{Op: OpAllow, Fn: "/a~1b,/m~0n"},
			`{"resourceType": "Patient", "a/b": 1, "m~n": 2}`},
		{"star on an object is a literal member",
			Obligation{Op: OpAllow, Fn: "/*"},
			`{"resourceType": "Patient", "*": 3}`},
		{"index segments never select array elements",
			Obligation{Op: OpAllow, Fn: "/address/0/state,/flags/1"},
			`{"resourceType": "Patient"}`},
		{"members of a scalar: the scalar goes",
			Obligation{Op: OpAllow, Fn: "/gender/text,/birthDate"},
			`{"resourceType": "Patient", "birthDate": "1986-02-10"}`},
		{"members of scalar array elements: elements go, and the emptied array with them (pruneView)",
			Obligation{Op: OpAllow, Fn: "/flags/*/x"},
			`{"resourceType": "Patient"}`},
		{"array listed without wildcard is kept whole",
			Obligation{Op: OpAllow, Fn: "/flags"},
			`{"resourceType": "Patient", "flags": [true, false]}`},
		{"objects with nothing listed become empty, and go (pruneView)",
			Obligation{Op: OpAllow, Fn: "/address/*/country"},
			`{"resourceType": "Patient"}`},
		{"missing paths are no-ops",
			Obligation{Op: OpAllow, Fn: "/photo,/telecom/*/value"},
			`{"resourceType": "Patient"}`},
		{"path selects where the list applies; resourceType kept there",
			Obligation{Op: OpAllow, Path: "/contained/*", Fn: "/gender"},
			strings.Replace(canon(t, allowDoc), `{"gender":"male","id":"pr1","name":[{"family":"Who"}],"resourceType":"Practitioner"}`,
				`{"gender":"male","resourceType":"Practitioner"}`, 1)},
		{"list applied to a nested object without resourceType",
			Obligation{Op: OpAllow, Path: "/nested", Fn: "/w"},
			strings.Replace(canon(t, allowDoc), `"nested":{"w":3,"x":{"y":1,"z":2}}`, `"nested":{"w":3}`, 1)},
		{"list applied to a scalar member removes it",
			Obligation{Op: OpAllow, Path: "/gender", Fn: "/x"},
			strings.Replace(canon(t, allowDoc), `"gender":"female",`, ``, 1)},
		{"member named empty",
			Obligation{Op: OpAllow, Fn: "/"},
			`{"resourceType": "Patient"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSON([]byte(allowDoc), []Obligation{tt.ob}, Options{})
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if want := redacted(t, tt.want); string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			// Idempotent: the allow-list keeps everything it kept.
			again, err := JSON(got, []Obligation{tt.ob}, Options{})
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %s then %s (%v)", got, again, err)
			}
		})
	}
}

func TestAllowNonObjectDocuments(t *testing.T) {
	ob := []Obligation{{Op: OpAllow, Fn: "/a"}}
	for in, want := range map[string]string{
		`"Jane Doe"`:         `null`,
		`42`:                 `null`,
		`null`:               `null`,
		`[{"a":1,"b":2}]`:    `null`, // a list names members, not array elements
		`{"b":{"a":1}}`:      `{}`,
		`{"resourceType":1}`: `{"resourceType":1}`,
	} {
		got, err := JSON([]byte(in), ob, Options{})
		if err != nil || string(got) != want {
			t.Errorf("allow /a on %s = %s, %v; want %s", in, got, err, want)
		}
	}
	got, err := JSON([]byte(`[{"a":1,"b":2},3]`), []Obligation{{Op: OpAllow, Fn: "/*/a"}}, Options{})
	if err != nil || string(got) != `[{"a":1}]` {
		t.Errorf("allow /*/a on an array = %s, %v", got, err)
	}
}

// TestAllowComposesInOrder: obligations before an allow-list see the whole
// document; obligations after it see only what it kept.
func TestAllowComposesInOrder(t *testing.T) {
	obs := []Obligation{
		{Op: OpGeneralize, Path: "/birthDate", Fn: GeneralizeYear},
		{Op: OpGeneralize, Path: "/address/*/postalCode", Fn: GeneralizeZIP3},
		{Op: OpAllow, Fn: "/birthDate,/address/*/postalCode,/address/*/state"},
		{Op: OpMask, Path: "/address/*/state"},
		{Op: OpRemove, Path: "/name"}, // already gone: a no-op
	}
	got, err := Apply("application/fhir+json", []byte(allowDoc), obs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := redacted(t, `{"resourceType":"Patient","birthDate":"1986",
	  "address":[{"postalCode":"021","state":"***"},{"postalCode":"000","state":"***"}]}`)
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAllowInputNotModified(t *testing.T) {
	in := []byte(allowDoc)
	orig := bytes.Clone(in)
	if _, err := JSON(in, []Obligation{{Op: OpAllow, Fn: "/gender"}}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, orig) {
		t.Fatal("JSON modified its input")
	}
}

func TestAllowNotForTextOrBinary(t *testing.T) {
	ob := []Obligation{{Op: OpAllow, Fn: "/a"}}
	if out, err := Apply("text/markdown", []byte("Jane Doe"), ob, Options{}); !errors.Is(err, ErrNotApplicable) || out != nil {
		t.Errorf("allow on text = %q, %v; want nil, ErrNotApplicable", out, err)
	}
	if out, err := Apply("image/png", []byte("\x89PNG"), ob, Options{}); !errors.Is(err, ErrBinaryWithheld) || out != nil {
		t.Errorf("allow on binary = %q, %v; want nil, ErrBinaryWithheld", out, err)
	}
}

// paths lists the JSON pointer of every leaf value (scalar or empty
// container) of v, with array indexes written as "*".
func paths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = true
		}
		for k, c := range x {
			k = strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			paths(prefix+"/"+k, c, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = true
		}
		for _, c := range x {
			paths(prefix+"/*", c, out)
		}
	default:
		out[prefix] = true
	}
}

// TestAllowKeepsOnlyListedPaths checks the defining property on a real
// Patient: every leaf of the output lies under a listed pointer (or is
// resourceType), and every listed leaf of the input survives.
func TestAllowKeepsOnlyListedPaths(t *testing.T) {
	list := []string{"/gender", "/address/*/state", "/address/*/postalCode", "/identifier/*/type", "/meta/versionId"}
	out, err := JSON([]byte(patientJSON), []Obligation{{Op: OpAllow, Fn: strings.Join(list, ",")}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) map[string]bool {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		paths("", v, m)
		return m
	}
	under := func(p string) bool {
		if p == "/resourceType" || strings.HasPrefix(p, "/meta/security/") {
			return true // the view's REDACTED label (labelRedacted)
		}
		for _, l := range list {
			if p == l || strings.HasPrefix(p, l+"/") {
				return true
			}
		}
		return false
	}
	got, in := decode(out), decode([]byte(patientJSON))
	var kept []string
	for p := range got {
		if !under(p) {
			t.Errorf("output has %s, which the list does not name", p)
		}
		kept = append(kept, p)
	}
	for p := range in {
		if under(p) && !got[p] {
			t.Errorf("listed %s was dropped", p)
		}
	}
	sort.Strings(kept)
	if len(kept) < 6 {
		t.Fatalf("kept only %v: the fixture proves little", kept)
	}
}

func TestHL7Code(t *testing.T) {
	tests := []struct{ op, want string }{
		{OpRemove, "REDACT"},
		{OpMask, "MASK"},
		{OpGeneralize, "DEID"},
		{OpScrub, "DEID"},
		{OpAllow, "MINEC"},
		{"", ""},
		{"redact", ""},
		{"REDACT", ""},
	}
	for _, tt := range tests {
		if got := (Obligation{Op: tt.op}).HL7Code(); got != tt.want {
			t.Errorf("Obligation{Op: %q}.HL7Code() = %q, want %q", tt.op, got, tt.want)
		}
	}
}

// TestVocabularyComplete: every op that validates has an HL7 code, and an
// op without one never validates, so no obligation can be accepted that
// the audit log cannot name in HL7 terms.
func TestVocabularyComplete(t *testing.T) {
	valid := map[string]Obligation{
		OpRemove:       {Op: OpRemove, Path: "/x"},
		OpMask:         {Op: OpMask, Path: "/x"},
		OpGeneralize:   {Op: OpGeneralize, Path: "/x", Fn: GeneralizeYear},
		OpScrub:        {Op: OpScrub},
		OpAllow:        {Op: OpAllow, Fn: "/x"},
		OpDeidentify:   {Op: OpDeidentify, Fn: DeidentifySafeHarbor},
		OpPseudonymize: {Op: OpPseudonymize, Fn: PseudonymizeKeyedID},
	}
	for op, o := range valid {
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		if o.HL7Code() == "" {
			t.Errorf("%s has no HL7 code", op)
		}
	}
	for _, op := range []string{"encrypt", "pseudonym", "keep", "Allow", "deid", "MINEC"} {
		o := Obligation{Op: op, Path: "/x", Fn: "/x"}
		if err := o.Validate(); !errors.Is(err, ErrUnknownOp) || o.HL7Code() != "" {
			t.Errorf("op %q: Validate = %v, HL7Code = %q; want ErrUnknownOp and no code", op, err, o.HL7Code())
		}
	}
}

// TestValidAllowFnAgreesWithParse: the allocation-free validator and the
// parser accept exactly the same Fn values.
func TestValidAllowFnAgreesWithParse(t *testing.T) {
	for _, fn := range []string{"", ",", "/", "/a", "/a,/b", "/a,", ",/a", "a", "/a~", "/a~0", "/a~1b", "/a~2",
		"/~", "/a/*/b,/c", "/a, /b", "//", "/a,,/b", "/é,/\x00"} {
		_, err := parseAllowFn(fn)
		if got := validAllowFn(fn); got != (err == nil) {
			t.Errorf("validAllowFn(%q) = %v, parseAllowFn error %v", fn, got, err)
		}
	}
}

func FuzzAllowFn(f *testing.F) {
	f.Add("/gender,/address/*/state")
	f.Add("/a~1b,/m~0n")
	f.Fuzz(func(t *testing.T, fn string) {
		_, err := parseAllowFn(fn)
		if got := validAllowFn(fn); got != (err == nil) {
			t.Fatalf("validAllowFn(%q) = %v, parseAllowFn error %v", fn, got, err)
		}
		_, perr := parsePointer(fn)
		if validPointer(fn) != (perr == nil) {
			t.Fatalf("validPointer(%q) disagrees with parsePointer (%v)", fn, perr)
		}
	})
}

// TestAllowKeepsNoExtensionItDoesNotName: a listed element is kept whole
// but for its extensions, at any depth, where the list does not name an
// "extension" member; a modifierExtension stays with its own extensions;
// a primitive's companion left empty goes (or becomes null in an array);
// an object left empty goes (pruneView).
// Until 2026-12-07 a biller's view of an Encounter released a name in
// class.extension, an MRN in period.extension and an account number in a
// Money's extension: the allow-list kept each listed element whole.
func TestAllowKeepsNoExtensionItDoesNotName(t *testing.T) {
	const doc = `{"resourceType":"Encounter","status":"finished",
	  "extension":[{"url":"u","valueString":"ROOT-CANARY"}],
	  "class":{"code":"IMP","extension":[{"url":"u","valueString":"Jane Canary"}]},
	  "period":{"start":"2024-01-01","_start":{"extension":[{"url":"u","valueString":"MRN 77441123"}]}},
	  "statusHistory":[{"status":"arrived","_status":{"id":"s1","extension":[{"url":"u","valueString":"555-867-5309"}]},"period":{"start":"2024-01-01"}}],
	  "cost":{"valueMoney":{"value":20,"currency":"USD","extension":[{"url":"u","extension":[{"url":"acct","valueString":"ACCT-4471123"}]}]}},
	  "given":["A","B"],"_given":[null,{"extension":[{"url":"u","valueString":"GIVEN-CANARY"}]}],
	  "hospitalization":{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"x"}]}],"admitSource":{"text":"er"}},
	  "listed":{"extension":[{"url":"kept","extension":[{"url":"inner","valueCode":"y"}]}],"other":{"extension":[{"url":"u","valueString":"NESTED-CANARY"}]}}}`
	ob := Obligation{Op: OpAllow, Fn: "/status,/class,/period,/statusHistory,/cost,/given,/_given,/hospitalization,/listed/extension,/listed/other"}
	got, err := JSON([]byte(doc), []Obligation{ob}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := redacted(t, `{"resourceType":"Encounter","status":"finished",
	  "class":{"code":"IMP"},
	  "period":{"start":"2024-01-01"},
	  "statusHistory":[{"status":"arrived","_status":{"id":"s1"},"period":{"start":"2024-01-01"}}],
	  "cost":{"valueMoney":{"value":20,"currency":"USD"}},
	  "given":["A","B"],
	  "hospitalization":{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"x"}]}],"admitSource":{"text":"er"}},
	  "listed":{"extension":[{"url":"kept","extension":[{"url":"inner","valueCode":"y"}]}]}}`)
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	again, err := JSON(got, []Obligation{ob}, Options{})
	if err != nil || !bytes.Equal(again, got) {
		t.Errorf("not idempotent: %s then %s (%v)", got, again, err)
	}
}

// TestAllowKeepsAListedModifierExtensionWhole: a modifierExtension the list
// names itself ("/modifierExtension", as the biller's views do) keeps its
// own extensions, as one inside a listed element does. Until h-review58
// the listed one lost them and went out as {"url":"m"}: no value and no
// extension (R4 ext-1), a modifier whose meaning was gone.
func TestAllowKeepsAListedModifierExtensionWhole(t *testing.T) {
	const doc = `{"resourceType":"Encounter","status":"finished",
	  "modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"x"}]}],
	  "hospitalization":{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"y"}]}],"extension":[{"url":"u","valueString":"CANARY"}]},
	  "class":[{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"z"}]}]}]}`
	ob := Obligation{Op: OpAllow, Fn: "/status,/modifierExtension,/hospitalization/modifierExtension,/class/*/modifierExtension"}
	got, err := JSON([]byte(doc), []Obligation{ob}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := redacted(t, `{"resourceType":"Encounter","status":"finished",
	  "modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"x"}]}],
	  "hospitalization":{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"y"}]}]},
	  "class":[{"modifierExtension":[{"url":"m","extension":[{"url":"part","valueCode":"z"}]}]}]}`)
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
