package fhirin

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every bad input gets an *Error naming file:line and the FHIR path, with
// the right sentinel, and quoting nothing of the content: each case plants
// "SECRET" in ids, references and values.
func TestBadInput(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	pat := `{"resourceType":"Patient","id":"SECRET-MRN-1"}`
	obs := func(extra string) string {
		return `{"resourceType":"Observation","id":"SECRET-obs","status":"final","code":{"text":"SECRET"},"subject":{"reference":"Patient/SECRET-MRN-1"}` + extra + `}`
	}
	bundle := func(typ string, entries ...string) string {
		return `{"resourceType":"Bundle","type":"` + typ + `","entry":[` + strings.Join(entries, ",\n") + `]}`
	}
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.String()
	}
	cases := []struct {
		name  string
		files map[string]string // the first key sorted is the path read, unless path is set
		path  string
		err   error
		where string
		fpath string // FHIR path in the error ("" = none expected)
	}{
		{name: "truncated NDJSON line", files: map[string]string{"Observation.ndjson": obs("") + "\n" + obs("")[:60]},
			err: ErrTruncated, where: "Observation.ndjson:2"},
		{name: "invalid JSON line", files: map[string]string{"Observation.ndjson": obs("") + "\n\n{\"resourceType\":SECRET}\n"},
			err: ErrJSON, where: "Observation.ndjson:3"},
		{name: "not gzip", files: map[string]string{"Observation.ndjson.gz": obs("")},
			err: ErrGzip, where: "Observation.ndjson.gz"},
		{name: "gzip cut short", files: map[string]string{"Observation.ndjson.gz": gz(obs("") + "\n" + obs("") + "\n")[:60]},
			err: ErrGzip, where: "Observation.ndjson.gz:1"},
		{name: "unknown resourceType", files: map[string]string{"x.ndjson": `{"resourceType":"SECRETType","id":"a"}`},
			err: ErrResourceType, where: "x.ndjson:1", fpath: "resourceType"},
		{name: "Parameters, an operation's envelope", files: map[string]string{"p.json": `{"resourceType":"Parameters","parameter":[{"name":"MemberPatient","resource":` + pat + `}]}`},
			err: ErrUnsupported, where: "p.json:1", fpath: "resourceType"},
		{name: "resourceType not the file's", files: map[string]string{"Observation.ndjson": pat},
			err: ErrResourceType, where: "Observation.ndjson:1", fpath: "resourceType"},
		{name: "missing id", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","status":"SECRET"}`},
			err: ErrID, where: "Observation.ndjson:1", fpath: "Observation.id"},
		{name: "invalid id", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"SECRET MRN"}`},
			err: ErrID, where: "Observation.ndjson:1", fpath: "Observation.id"},
		{name: "a member named twice: a second resourceType", files: map[string]string{"o.json": obs(`,"resourceType":"Organization"`)},
			err: ErrJSON, where: "o.json:1"},
		{name: "a member named twice: the Bundle's meta, the first with its labels", files: map[string]string{"b.json": "{\"resourceType\":\"Bundle\",\"type\":\"collection\",\n" +
			`"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},` + "\n" + `"meta":{"versionId":"2"},"entry":[{"resource":` + obs("") + `}]}`},
			err: ErrJSON, where: "b.json:3"},
		{name: "members differing only in case: an entry's id and Id", files: map[string]string{"b.json": bundle("collection",
			`{"fullUrl":"urn:uuid:0f6d3c1e-8a44-4a8e-9a59-2f1c8a9e0b01","resource":{"resourceType":"Patient","id":"SECRET-MRN-1","Id":"SECRET-MRN-2"}}`,
			`{"resource":{"resourceType":"Observation","id":"SECRET-obs","status":"final","code":{"text":"SECRET"},"subject":{"reference":"urn:uuid:0f6d3c1e-8a44-4a8e-9a59-2f1c8a9e0b01"}}}`)},
			err: ErrJSON, where: "b.json:1"},
		{name: "a member named twice, once escaped", files: map[string]string{"Observation.ndjson": obs(`,"\u0073ubject":{"reference":"Patient/SECRET-2"}`)},
			err: ErrJSON, where: "Observation.ndjson:1"},
		{name: "two resources on one NDJSON line, the first re-encoded", files: map[string]string{"DocumentReference.ndjson": `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"content":[{"attachment":{"contentType":"text/plain","data":"` + b64("SECRET") + `"}}]} ` +
			`{"resourceType":"DocumentReference","id":"d2","status":"current","subject":{"reference":"Patient/SECRET-MRN-2"}}`},
			err: ErrJSON, where: "DocumentReference.ndjson:1"},
		{name: "a Patient named under a member name that is content", files: map[string]string{"o.json": `{"resourceType":"Organization","id":"o","extension":[{"url":"x","SECRET MRN 1":{"reference":"Patient/SECRET-MRN-1"},"valueReference":{"reference":"Patient/SECRET-MRN-2"}}]}`},
			err: ErrStructure, where: "o.json:1", fpath: "Organization.extension[0].?"},
		{name: "a dangling urn:uuid under a member name that is content", files: map[string]string{"o.json": obs(`,"SECRET MRN 1":{"reference":"urn:uuid:0f6d3c1e-8a44-4a8e-9a59-2f1c8a9e0b01"}`)},
			err: ErrStructure, where: "o.json:1", fpath: "Observation.?"},
		{name: "bad lastUpdated", files: map[string]string{"Observation.ndjson": obs(`,"meta":{"lastUpdated":"SECRET"}`)},
			err: ErrValue, where: "Observation.ndjson:1", fpath: "Observation.meta.lastUpdated"},
		{name: "dangling urn:uuid in a Bundle", files: map[string]string{"b.json": bundle("transaction",
			`{"fullUrl":"urn:uuid:5ec2e7a0-0000-4000-8000-000000000001","resource":`+pat+`}`,
			`{"fullUrl":"urn:uuid:5ec2e7a0-0000-4000-8000-000000000002","resource":{"resourceType":"Observation","id":"SECRET-o","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:5ec2e7a0-0000-4000-8000-00000000dead"}}}`)},
			err: ErrDangling, where: "b.json:2", fpath: "Observation.subject.reference"},
		{name: "urn:uuid outside a Bundle", files: map[string]string{"o.json": obs(`,"encounter":{"reference":"urn:uuid:5ec2e7a0-0000-4000-8000-000000000001"}`)},
			err: ErrDangling, where: "o.json:1", fpath: "Observation.encounter.reference"},
		{name: "attachment url to a missing Binary", files: map[string]string{"DocumentReference.ndjson": `{"resourceType":"DocumentReference","id":"SECRET-d","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"content":[{"attachment":{"contentType":"application/pdf","url":"Binary/SECRET-b"}}]}`},
			err: ErrDangling, where: "DocumentReference.ndjson:1", fpath: "DocumentReference.content[0].attachment.url"},
		{name: "attachment bytes contradict contentType", files: map[string]string{"DocumentReference.ndjson": obs("")[:0] + `{"resourceType":"DocumentReference","id":"d","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"content":[{"attachment":{"contentType":"application/pdf","data":"` + b64("SECRET note, plain text") + `"}}]}`},
			err: ErrAttachment, where: "DocumentReference.ndjson:1", fpath: "DocumentReference.content[0].attachment.contentType"},
		{name: "PDF bytes declared as text", files: map[string]string{"DiagnosticReport.ndjson": `{"resourceType":"DiagnosticReport","id":"d","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/SECRET-MRN-1"},"presentedForm":[{"contentType":"text/plain","data":"` + b64("%PDF-1.4\n\x00\x01\x02SECRET") + `"}]}`},
			err: ErrAttachment, where: "DiagnosticReport.ndjson:1", fpath: "DiagnosticReport.presentedForm[0].contentType"},
		{name: "bad base64", files: map[string]string{"Media.ndjson": `{"resourceType":"Media","id":"m","status":"completed","subject":{"reference":"Patient/SECRET-MRN-1"},"content":{"contentType":"image/png","data":"SEC=RET="}}`},
			err: ErrAttachment, where: "Media.ndjson:1", fpath: "Media.content.data"},
		{name: "not R4 base64Binary", files: map[string]string{"Media.ndjson": `{"resourceType":"Media","id":"m","status":"completed","subject":{"reference":"Patient/SECRET-MRN-1"},"content":{"contentType":"image/png","data":"SECRET!!"}}`},
			err: ErrValue, where: "Media.ndjson:1", fpath: "Media.content.data"},
		{name: "data without contentType", files: map[string]string{"Binary.ndjson": `{"resourceType":"Binary","id":"b","securityContext":{"reference":"Patient/SECRET-MRN-1"},"data":"` + b64("SECRET") + `"}`},
			err: ErrStructure, where: "Binary.ndjson:1", fpath: "Binary.contentType"},
		{name: "two patients", files: map[string]string{"Observation.ndjson": obs(`,"performer":[{"reference":"Practitioner/x"},{"reference":"Patient/SECRET-MRN-2"}]`)},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.performer[1]"},
		{name: "contained Patient", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"contained":[{"resourceType":"Patient","id":"p1","name":[{"family":"SECRET"}]}],"subject":{"reference":"#p1"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "Patient by identifier only", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"type":"Patient","identifier":{"value":"SECRET"}}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "unresolved conditional Patient", files: map[string]string{"b.json": bundle("transaction",
			`{"fullUrl":"urn:uuid:5ec2e7a0-0000-4000-8000-000000000002","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient?identifier=urn:mrn|SECRET"}}}`)},
			err: ErrCompartment, where: "b.json:1", fpath: "Observation.subject"},
		{name: "malformed Patient reference", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/SECRET MRN"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "urn:oid Patient naming no entry", files: map[string]string{"b.json": bundle("collection",
			`{"fullUrl":"urn:oid:1.2.3.4.5","resource":`+pat+`}`,
			`{"fullUrl":"urn:oid:1.2.3.4.6","resource":{"resourceType":"Observation","id":"SECRET-o","status":"final","code":{"text":"x"},"subject":{"reference":"urn:oid:1.2.3.SECRET"}}}`)},
			err: ErrCompartment, where: "b.json:2", fpath: "Observation.subject"},
		{name: "urn:oid outside a Bundle", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"urn:oid:1.2.3.SECRET"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "absolute URL that is no Type/id and no entry", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"https://ehr.example.org/records/SECRET-MRN-1"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "unresolved absolute performer", files: map[string]string{"Observation.ndjson": obs(`,"performer":[{"reference":"https://ehr.example.org/staff/SECRET"}]`)},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.performer[0]"},
		{name: "RESTful fullUrl naming another resource", files: map[string]string{"b.json": bundle("collection",
			`{"fullUrl":"https://ehr.example.org/fhir/Patient/SECRET-MRN-2","resource":`+pat+`}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].fullUrl"},
		{name: "lowercase type in a reference", files: map[string]string{"Condition.ndjson": `{"resourceType":"Condition","id":"c","subject":{"reference":"patient/SECRET-MRN-1"},"code":{"text":"SECRET"}}`},
			err: ErrCompartment, where: "Condition.ndjson:1", fpath: "Condition.subject"},
		{name: "malformed performer reference", files: map[string]string{"Observation.ndjson": obs(`,"performer":[{"reference":"practitioner/SECRET"}]`)},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.performer[0]"},
		{name: "conditional reference to no R4 type", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"patient?identifier=SECRET"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "type Patient, reference to another type", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"Group/SECRET","type":"Patient"}}`},
			err: ErrCompartment, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "Reference(Patient) by identifier", files: map[string]string{"Immunization.ndjson": `{"resourceType":"Immunization","id":"i","status":"completed","vaccineCode":{"text":"x"},"occurrenceDateTime":"2020-01-01","patient":{"identifier":{"system":"urn:oid:2.16.840.1.113883.19.5","value":"SECRET"}}}`},
			err: ErrCompartment, where: "Immunization.ndjson:1", fpath: "Immunization.patient"},
		{name: "required Reference(Patient) missing", files: map[string]string{"Immunization.ndjson": `{"resourceType":"Immunization","id":"i","status":"completed","vaccineCode":{"text":"SECRET"},"occurrenceDateTime":"2020-01-01"}`},
			err: ErrStructure, where: "Immunization.ndjson:1", fpath: "Immunization.patient"},
		{name: "Reference(Patient) by display", files: map[string]string{"AllergyIntolerance.ndjson": `{"resourceType":"AllergyIntolerance","id":"a","patient":{"display":"SECRET Doe"},"code":{"text":"peanut"}}`},
			err: ErrCompartment, where: "AllergyIntolerance.ndjson:1", fpath: "AllergyIntolerance.patient"},
		{name: "Reference(Patient) to another type", files: map[string]string{"Coverage.ndjson": `{"resourceType":"Coverage","id":"c","status":"active","beneficiary":{"reference":"RelatedPerson/SECRET"},"payor":[{"reference":"Organization/o"}]}`},
			err: ErrCompartment, where: "Coverage.ndjson:1", fpath: "Coverage.beneficiary"},
		{name: "Reference(Patient) to a contained resource", files: map[string]string{"Consent.ndjson": `{"resourceType":"Consent","id":"c","status":"active","contained":[{"resourceType":"RelatedPerson","id":"r","patient":{"reference":"Patient/SECRET"}}],"patient":{"reference":"#r"}}`},
			err: ErrCompartment, where: "Consent.ndjson:1", fpath: "Consent.patient"},
		{name: "Reference(Patient) by extension only", files: map[string]string{"Claim.ndjson": `{"resourceType":"Claim","id":"c","status":"active","type":{"text":"x"},"use":"claim","created":"2020-01-01","provider":{"reference":"Organization/o"},"priority":{"text":"x"},"insurance":[{"sequence":1,"focal":true,"coverage":{"reference":"Coverage/c"}}],"patient":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}}`},
			err: ErrCompartment, where: "Claim.ndjson:1", fpath: "Claim.patient"},
		{name: "reference not a string", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":{"SECRET":1}}}`},
			err: ErrJSON, where: "Observation.ndjson:1", fpath: "Observation.subject.reference"},
		{name: "Reference written as a string", files: map[string]string{"Observation.ndjson": `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":"Patient/SECRET"}`},
			err: ErrJSON, where: "Observation.ndjson:1", fpath: "Observation.subject"},
		{name: "meta.security not an array", files: map[string]string{"Observation.ndjson": obs(`,"meta":{"security":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV","display":"SECRET"}}`)},
			err: ErrJSON, where: "Observation.ndjson:1", fpath: "Observation.meta.security"},
		{name: "security label not a Coding", files: map[string]string{"Observation.ndjson": obs(`,"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":["SECRET"]}]}`)},
			err: ErrJSON, where: "Observation.ndjson:1", fpath: "Observation.meta.security[0].code"},
		{name: "securityLabel not an array", files: map[string]string{"DocumentReference.ndjson": `{"resourceType":"DocumentReference","id":"d","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"securityLabel":{"coding":[{"code":"R"}]},"content":[]}`},
			err: ErrJSON, where: "DocumentReference.ndjson:1", fpath: "DocumentReference.securityLabel"},
		{name: "confidentiality not a code", files: map[string]string{"Composition.ndjson": `{"resourceType":"Composition","id":"c","subject":{"reference":"Patient/SECRET-MRN-1"},"confidentiality":{"code":"R"}}`},
			err: ErrJSON, where: "Composition.ndjson:1", fpath: "Composition.confidentiality"},
		{name: "Binary linked by nobody", files: map[string]string{"Binary.ndjson": `{"resourceType":"Binary","id":"SECRET-b","contentType":"text/plain","data":"` + b64("SECRET") + `"}`},
			err: ErrCompartment, where: "Binary.ndjson:1", fpath: "Binary"},
		{name: "Binary linked from two patients", files: map[string]string{
			"Binary.ndjson":            `{"resourceType":"Binary","id":"b","contentType":"text/plain","data":"` + b64("SECRET") + `"}`,
			"DocumentReference.ndjson": `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"content":[{"attachment":{"url":"Binary/b"}}]}` + "\n" + `{"resourceType":"DocumentReference","id":"d2","status":"current","subject":{"reference":"Patient/SECRET-MRN-2"},"content":[{"attachment":{"url":"Binary/b"}}]}`},
			path: ".", err: ErrCompartment, where: "DocumentReference.ndjson:2", fpath: "DocumentReference.content[0].attachment.url"},
		{name: "message Bundle", files: map[string]string{"b.json": bundle("message", `{"resource":`+pat+`}`)},
			err: ErrUnsupported, where: "b.json:1", fpath: "Bundle.type"},
		{name: "nested Bundle", files: map[string]string{"b.json": bundle("collection", `{"resource":`+bundle("collection")+`}`)},
			err: ErrUnsupported, where: "b.json:1", fpath: "Bundle"},
		{name: "conditional delete", files: map[string]string{"b.json": bundle("transaction", `{"request":{"method":"DELETE","url":"Patient?identifier=SECRET"}}`)},
			err: ErrUnsupported, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a DELETE of another server's resource", files: map[string]string{"b.json": bundle("transaction", `{"request":{"method":"DELETE","url":"https://other.example/fhir/Patient/SECRET-MRN-1"}}`)},
			err: ErrUnsupported, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a DELETE of an absolute URL on another server than the export's", files: map[string]string{
			"m.json":     `{"transactionTime":"2024-01-01T00:00:00Z","request":"https://ehr.example/fhir/$export","deleted":[{"type":"Bundle","url":"del.ndjson"}]}`,
			"del.ndjson": bundle("transaction", `{"request":{"method":"DELETE","url":"https://other.example/fhir/Patient/SECRET-MRN-1"}}`)},
			path: "m.json", err: ErrUnsupported, where: "del.ndjson:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a declared contentType that is content, not a media type custos knows", files: map[string]string{"DocumentReference.ndjson": `{"resourceType":"DocumentReference","id":"d1","status":"current","subject":{"reference":"Patient/SECRET-MRN-1"},"content":[{"attachment":{"contentType":"SECRET/MRN-1","data":"` + b64("%PDF-1.4\n%SECRET") + `"}}]}`},
			err: ErrAttachment, where: "DocumentReference.ndjson:1", fpath: "DocumentReference.content[0].attachment.contentType"},
		{name: "a DELETE of one version", files: map[string]string{"b.json": bundle("transaction", `{"request":{"method":"DELETE","url":"Patient/SECRET-MRN-1/_history/1"}}`)},
			err: ErrUnsupported, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "an entry whose request method is no HTTP verb", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"MERGE","url":"Patient/SECRET-MRN-1"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.method"},
		{name: "a PUT naming another id than its resource's", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"Patient/SECRET-MRN-2"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		// The same written with a leading slash or a query (_format) was
		// imported under the resource's id (probe-import3).
		{name: "a PUT naming another id than its resource's, from the root", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"/Patient/SECRET-MRN-2"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a PUT naming another id than its resource's, with a query", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"Patient/SECRET-MRN-2?_format=json"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		// A url neither Type/id nor a conditional update (a trailing
		// slash, a path before the type) was not checked, and the entry
		// imported under the resource's id (h-review21).
		{name: "a PUT url with a trailing slash", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"Patient/SECRET-MRN-2/"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a PUT url with a path before the type", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"fhir/Patient/SECRET-MRN-2"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a conditional PUT of another type", files: map[string]string{"b.json": bundle("transaction", `{"resource":`+pat+`,"request":{"method":"PUT","url":"Observation?identifier=SECRET"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].request.url"},
		{name: "a searchset outcome entry holding a resource that is no OperationOutcome", files: map[string]string{"b.json": bundle("searchset", `{"resource":`+obs("")+`,"search":{"mode":"outcome"}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].search.mode"},
		{name: "a contained resource containing another patient's Observation (R4 dom-2)", files: map[string]string{"MedicationRequest.ndjson": `{"resourceType":"MedicationRequest","id":"r","status":"active","intent":"order","medicationCodeableConcept":{"text":"x"},"subject":{"reference":"Patient/SECRET-MRN-1"},"contained":[{"resourceType":"Observation","id":"c1","status":"final","code":{"text":"x"},"contained":[` + obs(`,"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]}`) + `],"hasMember":[{"reference":"#SECRET-obs"}]}],"supportingInformation":[{"reference":"#c1"}]}`},
			err: ErrValue, where: "MedicationRequest.ndjson:1", fpath: "MedicationRequest.contained[0].contained"},
		// A contained Parameters is taken (an operation's output kept with
		// its GuidanceResponse), but not one holding resources: their
		// patient and labels would not be read, as with R4 dom-2.
		{name: "a contained Parameters holding another patient's Observation", files: map[string]string{"GuidanceResponse.ndjson": `{"resourceType":"GuidanceResponse","id":"g","moduleUri":"http://example.org/m","status":"success","subject":{"reference":"Patient/SECRET-MRN-1"},"contained":[{"resourceType":"Parameters","id":"p","parameter":[{"name":"SECRET","part":[{"name":"x","resource":{"resourceType":"Observation","id":"o2","status":"final","code":{"text":"SECRET"},"subject":{"reference":"Patient/SECRET-MRN-2"},"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]}}}]}]}],"outputParameters":{"reference":"#p"}}`},
			err: ErrUnsupported, where: "GuidanceResponse.ndjson:1", fpath: "GuidanceResponse.contained[0].parameter[0].part[0].resource"},
		{name: "a searchset whose outcome reports an error", files: map[string]string{"b.json": bundle("searchset", `{"resource":`+pat+`,"search":{"mode":"match"}}`,
			`{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"too-costly","diagnostics":"SECRET-MRN-2 not returned"}]},"search":{"mode":"outcome"}}`)},
			err: ErrValue, where: "b.json:2", fpath: "Bundle.entry[1]"},
		{name: "a searchset whose outcome without search.mode reports an error", files: map[string]string{"b.json": bundle("searchset", `{"resource":`+pat+`}`,
			`{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"fatal","code":"SECRET code","diagnostics":"SECRET-MRN-2"}]}}`)},
			err: ErrValue, where: "b.json:2", fpath: "Bundle.entry[1]"},
		{name: "a subsetted resource (an export or search with _elements)", files: map[string]string{"Observation.ndjson": obs(`,"meta":{"tag":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ObservationValue","code":"SUBSETTED"}]}`)},
			err: ErrValue, where: "Observation.ndjson:1", fpath: "Observation.meta.tag[0]"},
		{name: "a subsetted resource in a searchset (_summary)", files: map[string]string{"b.json": bundle("searchset", `{"resource":{"resourceType":"Patient","id":"SECRET-MRN-1","meta":{"tag":[{"system":"http://hl7.org/fhir/v3/ObservationValue","code":"SUBSETTED","display":"SECRET"}]}}}`)},
			err: ErrValue, where: "b.json:1", fpath: "Patient.meta.tag[0]"},
		{name: "entry without resource", files: map[string]string{"b.json": bundle("collection", `{"fullUrl":"urn:uuid:SECRET"}`)},
			err: ErrValue, where: "b.json:1", fpath: "Bundle.entry[0].resource"},
		{name: "truncated Bundle file", files: map[string]string{"b.json": bundle("collection", `{"resource":`+pat+`}`, `{"resource":`+pat+`}`)[:120]},
			err: ErrTruncated, where: "b.json:2"},
		{name: "custos manifest", files: map[string]string{"manifest.jsonl": `{"uri":"fhir://t/patients/x/observation/y","file":"SECRET.json"}`},
			path: ".", err: ErrCustosManifest, where: "."},
		{name: "unknown file in a directory", files: map[string]string{"Patient.ndjson": pat, "notes.txt": "SECRET"},
			path: ".", err: ErrFormat, where: "notes.txt"},
		{name: "export manifest with a remote url", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"https://ehr.example/SECRET.ndjson"}]}`},
			err: ErrManifest, where: "m.json", fpath: "output[0].url"},
		{name: "export manifest listing errors", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"Patient.ndjson"}],"error":[{"type":"OperationOutcome","url":"e.ndjson"}]}`, "Patient.ndjson": pat,
			"e.ndjson": `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"processing","diagnostics":"SECRET-MRN-1 failed"}]}`},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "error[0]"},
		{name: "export manifest listing an error file it does not hold", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"Patient.ndjson"}],"error":[{"type":"OperationOutcome","url":"SECRET.ndjson"}]}`, "Patient.ndjson": pat},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "error[0].url"},
		{name: "export manifest with a fatal outcome (later editions)", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"Patient.ndjson"}],"outcome":[{"url":"o.ndjson"}]}`, "Patient.ndjson": pat,
			"o.ndjson": `{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]}` + "\n" + `{"resourceType":"OperationOutcome","issue":[{"severity":"fatal","code":"SECRET code"}]}`},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "outcome[0]"},
		{name: "export manifest with an outcome file holding no OperationOutcome", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"Patient.ndjson"}],"outcome":[{"url":"o.ndjson"}]}`, "Patient.ndjson": pat, "o.ndjson": pat},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "outcome[0].url"},
		{name: "export manifest in pages", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"Patient.ndjson"}],"link":[{"relation":"next","url":"https://ehr.example/SECRET?page=2"}]}`, "Patient.ndjson": pat},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "link"},
		{name: "export manifest organized by patient", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","outputOrganizedBy":"Patient","output":[{"url":"Patient.ndjson"}]}`, "Patient.ndjson": pat},
			path: "m.json", err: ErrManifest, where: "m.json", fpath: "outputOrganizedBy"},
		{name: "export manifest naming a missing file", files: map[string]string{"m.json": `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"SECRET.ndjson"}]}`},
			err: ErrManifest, where: "m.json", fpath: "output[0].url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := ""
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if first == "" || name < first {
					first = name
				}
			}
			path := filepath.Join(dir, first)
			if tc.path != "" {
				path = filepath.Join(dir, tc.path)
			}
			_, err := readAll(t, path)
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want an *Error wrapping %v", err, tc.err)
			}
			wantWhere := tc.where
			if wantWhere == "." {
				wantWhere = filepath.Base(dir)
			}
			if fe.Where != wantWhere || fe.Path != tc.fpath {
				t.Errorf("at %q %q, want %q %q (%v)", fe.Where, fe.Path, wantWhere, tc.fpath, err)
			}
			// Case-insensitive: a quoted media type comes out lowercased.
			if strings.Contains(strings.ToLower(err.Error()), "secret") {
				t.Errorf("the error quotes content: %v", err)
			}
		})
	}
}

// Options.MaxLine bounds a line: a longer one is an error, not a larger buffer.
func TestMaxLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Observation.ndjson")
	long := `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"note":[{"text":"` + strings.Repeat("x", 4096) + `"}]}`
	if err := os.WriteFile(p, []byte(`{"resourceType":"Observation","id":"a","status":"final","code":{"text":"x"}}`+"\n"+long+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Read(t.Context(), p, Options{Link: testLink, MaxLine: 1024}, func(Item) error { return nil })
	var fe *Error
	if !errors.As(err, &fe) || !errors.Is(err, ErrLineTooLong) || errors.Is(err, ErrValueTooLong) || fe.Where != "Observation.ndjson:2" {
		t.Errorf("err = %v, want ErrLineTooLong at line 2", err)
	}
	// A JSON file's value says what it is, the limit and the ways past it
	// (until 2026-12-07 "NDJSON line too long: longer than 1024 bytes"),
	// and is still an ErrLineTooLong for errors.Is.
	j := filepath.Join(dir, "o.json")
	if err := os.WriteFile(j, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Read(t.Context(), j, Options{Link: testLink, MaxLine: 1024}, func(Item) error { return nil })
	if !errors.As(err, &fe) || !errors.Is(err, ErrValueTooLong) || !errors.Is(err, ErrLineTooLong) || fe.Where != "o.json:1" {
		t.Errorf("JSON file: err = %v, want ErrValueTooLong (and ErrLineTooLong) at o.json:1", err)
	}
	const want = "fhirin: o.json:1: JSON value too long: a JSON value (a Bundle or a resource) of more than 1024 bytes (1 KiB), over the limit on one value that the reader holds whole; split it into smaller Bundles, or export the data as NDJSON (one resource a line)"
	if err == nil || err.Error() != want {
		t.Errorf("JSON file: err = %v\nwant %s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "NDJSON line") {
		t.Errorf("JSON file: err = %v, calls the value an NDJSON line", err)
	}
	// A value past MaxLine that the decoder's last read took whole (its
	// buffer grows by doubling, and one read may bring in up to its size):
	// a Bundle of 108 MiB was read, against a MaxLine of 96 MiB, and held
	// 678 MB (probe-import2). Every size past MaxLine is refused.
	for _, size := range []int{1<<20 + 1, 3 << 19, 2<<20 - 4096} {
		big := filepath.Join(dir, "big.json")
		body := `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"note":[{"text":"` + strings.Repeat("x", size) + `"}]}`
		if err := os.WriteFile(big, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Read(t.Context(), big, Options{Link: testLink, MaxLine: 1 << 20}, func(Item) error { return nil }); !errors.Is(err, ErrValueTooLong) || !strings.Contains(err.Error(), "of more than 1048576 bytes (1 MiB)") {
			t.Errorf("a JSON value of %d bytes, MaxLine %d: err = %v, want ErrValueTooLong naming the limit", len(body), 1<<20, err)
		}
	}
	// One of MaxLine bytes exactly is read.
	body := `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"note":[{"text":"`
	body += strings.Repeat("x", 1<<20-len(body)-4) + `"}]}`
	if err := os.WriteFile(j, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Read(t.Context(), j, Options{Link: testLink, MaxLine: 1 << 20}, func(Item) error { return nil }); err != nil || len(body) != 1<<20 {
		t.Errorf("a JSON value of %d bytes, MaxLine %d: %v", len(body), 1<<20, err)
	}
	if err := Read(t.Context(), p, Options{Link: testLink}, func(Item) error { return nil }); err != nil {
		t.Errorf("default MaxLine: %v", err)
	}
}

// A callback error stops Read and is returned as it is; Link is required.
func TestReadStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Read(t.Context(), "testdata/bulk", Options{Link: testLink}, func(Item) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("err = %v after %d items, want stop after 1", err, n)
	}
	if err := Read(t.Context(), "testdata/bulk", Options{}, func(Item) error { return nil }); err == nil {
		t.Error("Read without Link succeeded")
	}
}

// Read reports every problem it finds, each once (the second pass finds
// the first pass's again), up to MaxProblems, and yields nothing after the
// first.
func TestEveryProblem(t *testing.T) {
	dir := t.TempDir()
	good := `{"resourceType":"DocumentReference","id":"ok","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","data":"aGk="}}]}`
	bad := []string{
		`{"resourceType":"DocumentReference","id":"a","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/missing"}}]}`,
		`{"resourceType":"DocumentReference","status":"current","subject":{"reference":"Patient/p"}}`,
		`{"resourceType":"DocumentReference","id":"c",`,
	}
	lines := []string{good, bad[0], good, bad[1], bad[2], good}
	if err := os.WriteFile(filepath.Join(dir, "DocumentReference.ndjson"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	items, err := readAll(t, dir)
	if len(items) != 0 {
		t.Errorf("%d items yielded despite problems", len(items))
	}
	var got []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fe := e.(*Error)
		got = append(got, fe.Where+" "+fe.Err.Error())
	}
	want := []string{"DocumentReference.ndjson:4 missing or invalid id", "DocumentReference.ndjson:5 truncated JSON",
		"DocumentReference.ndjson:2 dangling reference"}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%v\nwant\n%v", got, want)
	}

	var many []string
	for range MaxProblems + 5 {
		many = append(many, bad[1])
	}
	if err := os.WriteFile(filepath.Join(dir, "DocumentReference.ndjson"), []byte(strings.Join(many, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, dir)
	errs := err.(interface{ Unwrap() []error }).Unwrap()
	if len(errs) != MaxProblems+1 || !strings.Contains(errs[MaxProblems].Error(), "more than 20 problems") {
		t.Errorf("%d errors, the last %v", len(errs), errs[len(errs)-1])
	}
}

// A byte order mark before the JSON is ignored, in NDJSON and JSON files;
// a canceled context stops Read with its error.
func TestBOMAndCancel(t *testing.T) {
	dir := t.TempDir()
	bom := "\xef\xbb\xbf"
	for name, content := range map[string]string{
		// Every NDJSON line is a JSON text of its own, which RFC 8259 lets
		// a byte order mark precede: files of Windows tools concatenated
		// carry one at the start of later lines (it was ErrJSON there).
		"Patient.ndjson": bom + `{"resourceType":"Patient","id":"a"}` + "\r\n" + bom + `{"resourceType":"Patient","id":"c"}` + "\r\n",
		"b.json":         bom + `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"b"}}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if f, _ := Detect(filepath.Join(dir, name)); f == FormatUnknown {
			t.Errorf("Detect(%s) = %v", name, f)
		}
	}
	if items := mustReadAll(t, dir); len(items) != 3 {
		t.Errorf("%d items, want 3", len(items))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Read(ctx, "testdata/synthea-bundle.json", Options{Link: testLink}, func(Item) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Read: %v", err)
	}
}

// FHIR XML is refused as such, whatever the file is named, and a file
// holding an empty JSON array is refused like an empty file: neither holds
// a resource or a Bundle, and neither may import nothing silently.
func TestNotFHIRJSON(t *testing.T) {
	dir := t.TempDir()
	xml := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Patient xmlns="http://hl7.org/fhir"><id value="SECRET-MRN"/></Patient>`
	for _, tc := range []struct {
		name, content, where, detail string
	}{
		{"Patient.xml", xml, "Patient.xml", "FHIR XML is not supported"},
		{"patient.json", "\xef\xbb\xbf  \n" + xml, "patient.json", "FHIR XML is not supported"},
		{"empty-array.json", "\n[ \n ]\n", "empty-array.json:2", "an empty JSON array"},
		{"empty.json", "\n\n", "empty.json", "empty file"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		items, err := readAll(t, p)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) || fe.Where != tc.where || !strings.Contains(fe.Detail, tc.detail) {
			t.Errorf("%s: %d items, err = %v; want ErrFormat at %s saying %q", tc.name, len(items), err, tc.where, tc.detail)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error quotes content: %v", err)
		}
	}
	// A Bundle without entries is a Bundle: nothing to import, no error.
	p := filepath.Join(dir, "empty-searchset.json")
	if err := os.WriteFile(p, []byte(`{"resourceType":"Bundle","type":"searchset","total":0}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if items, err := readAll(t, p); err != nil || len(items) != 0 {
		t.Errorf("an empty searchset: %d items, %v", len(items), err)
	}
}

// Exporters' quirks get a clear error, or none: a UTF-8 byte order mark
// before an $export manifest and its outcome file (read as any other
// JSON; the manifest was detected, then refused as "not a JSON $export
// manifest"); a UTF-16 file (Windows PowerShell's default) is named as such,
// once (it was reported as ISO-8859-1 or windows-1252 and then as a second,
// truncated line); an $export manifest in a directory read as an export
// directory is named (it was "resourceType: missing"); and an output file
// without its type is said to lack one.
func TestExporterQuirks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bom := "\xef\xbb\xbf"
	utf16 := func(s string) string {
		b := []byte{0xff, 0xfe}
		for _, c := range []byte(s) {
			b = append(b, c, 0)
		}
		return string(b)
	}
	pat := `{"resourceType":"Patient","id":"SECRET-MRN-1"}`
	write("bom/Patient.ndjson", pat+"\n")
	write("bom/o.ndjson", bom+`{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]}`+"\n")
	m := write("bom/manifest.json", bom+`{"transactionTime":"2024-01-01T00:00:00Z","request":"https://ehr.example/fhir/$export","output":[{"type":"Patient","url":"Patient.ndjson"}],"error":[{"type":"OperationOutcome","url":"o.ndjson"}]}`)
	if items, err := readAll(t, m); err != nil || len(items) != 1 {
		t.Errorf("a manifest with a byte order mark: %d items, %v", len(items), err)
	}
	for _, tc := range []struct {
		path   string
		err    error
		where  string
		fpath  string
		detail string
	}{
		{write("u16/Patient.ndjson", utf16(pat+"\r\n"+pat+"\r\n")), ErrJSON, "Patient.ndjson:1", "", "UTF-16"},
		{write("u16/b.json", utf16(pat)), ErrJSON, "b.json:1", "", "UTF-16"},
		{write("dir/manifest.json", `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"type":"Patient","url":"SECRET.ndjson"}]}`), ErrFormat, "manifest.json:1", "", "$export manifest"},
		{write("notype/m.json", `{"transactionTime":"2024-01-01T00:00:00Z","output":[{"url":"Patient.ndjson"}]}`), ErrManifest, "m.json", "output[0].type", "missing"},
		// gzip saved under a plain name (a download kept as the server's
		// Content-Encoding sent it): it was "not UTF-8, transcode from
		// ISO-8859-1", once a line, or "not a FHIR input format".
		{write("gz/Patient.ndjson", gzipped(pat+"\n"+pat+"\n")), ErrFormat, "Patient.ndjson:1", "", "gzip"},
		{write("gz/b.json", gzipped(pat)), ErrFormat, "b.json:1", "", "gzip"},
	} {
		p := tc.path
		if filepath.Base(filepath.Dir(p)) == "dir" {
			write("dir/Patient.ndjson", pat)
			p = filepath.Dir(p)
		}
		if tc.err == ErrManifest {
			write("notype/Patient.ndjson", pat)
		}
		_, err := readAll(t, p)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, tc.err) || fe.Where != tc.where || fe.Path != tc.fpath || !strings.Contains(fe.Detail, tc.detail) {
			t.Errorf("%s: err = %v; want %v at %s %s saying %q", tc.path, err, tc.err, tc.where, tc.fpath, tc.detail)
			continue
		}
		if n := len(strings.Split(err.Error(), "\n")); n != 1 || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %d problems, or content quoted: %v", tc.path, n, err)
		}
	}
}

// gzipped is s gzip-compressed.
func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// TestMinifiedBundleNamesTheEntry: in a Bundle written on one line (an
// NDJSON Bundle, a server's answer) every entry is at line 1, so an error
// names the entry as well; two entries with the same problem were one
// problem, reported once, naming neither. Where stays file:line.
func TestMinifiedBundleNamesTheEntry(t *testing.T) {
	obs := func(id string) string {
		return `{"resource":{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"x"},"subject":{"reference":"patient/SECRET-MRN-1"}}}`
	}
	b := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p"}},` + obs("o1") + `,` + obs("o2") + `]}`
	path := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readAll(t, path)
	var fe *Error
	if !errors.As(err, &fe) || !errors.Is(err, ErrCompartment) || fe.Where != "b.json:1" || fe.Path != "Observation.subject" {
		t.Fatalf("err = %v, want ErrCompartment at b.json:1 Observation.subject", err)
	}
	for _, want := range []string{"(Bundle.entry[1])", "(Bundle.entry[2])"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if strings.Contains(strings.ToLower(err.Error()), "secret") {
		t.Errorf("the error quotes content: %v", err)
	}
	// A Bundle written an entry a line names each by its line alone.
	pretty := strings.ReplaceAll(b, `,{"resource"`, ",\n"+`{"resource"`)
	if err := os.WriteFile(path, []byte(pretty), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = readAll(t, path); err == nil || strings.Contains(err.Error(), "Bundle.entry[") || !strings.Contains(err.Error(), "b.json:2:") || !strings.Contains(err.Error(), "b.json:3:") {
		t.Errorf("a Bundle with an entry a line: %v", err)
	}
}

// TestTooDeep: a well-formed value nested deeper than encoding/json's
// 10,000 levels was reported as "invalid JSON"; the error now says it is
// nested too deep, in a .json file and on an NDJSON line.
func TestTooDeep(t *testing.T) {
	deep := `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"extension":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`
	dir := t.TempDir()
	for _, name := range []string{"o.json", "Observation.ndjson"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(deep+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readAll(t, path)
		if !errors.Is(err, ErrJSON) || !strings.Contains(err.Error(), name+":1: malformed JSON: nested deeper than 10000 levels") {
			t.Errorf("%s: err = %v, want it nested too deep", name, err)
		}
		os.Remove(path)
	}
}

// TestMinifiedBundleNamesTheEntryOfIndexProblems: the problems found once
// the whole input is read (a Binary nothing places, an attachment url to a
// Binary that is not there: index.check) kept only file:1 of a minified
// Bundle, so two entries with the same problem were still reported once
// and neither was named, as before e4c046a for the others. Found by
// review (h-review16).
func TestMinifiedBundleNamesTheEntryOfIndexProblems(t *testing.T) {
	bin := func(id string) string {
		return `{"resource":{"resourceType":"Binary","id":"` + id + `","contentType":"text/plain","data":"aGk="}}`
	}
	doc := func(id, bin string) string {
		return `{"resource":{"resourceType":"DocumentReference","id":"` + id + `","status":"current","subject":{"reference":"Patient/p"},"content":[{"attachment":{"contentType":"text/plain","url":"Binary/` + bin + `"}}]}}`
	}
	for name, b := range map[string]string{
		"unplaced Binaries": `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p"}},` + bin("SECRET-1") + `,` + bin("SECRET-2") + `]}`,
		"dangling urls":     `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p"}},` + doc("d1", "SECRET-1") + `,` + doc("d2", "SECRET-2") + `]}`,
	} {
		path := filepath.Join(t.TempDir(), "b.json")
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readAll(t, path)
		if err == nil {
			t.Fatalf("%s: read without error", name)
		}
		for _, want := range []string{"(Bundle.entry[1])", "(Bundle.entry[2])"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not name %s: %v", name, want, err)
			}
		}
		if strings.Contains(strings.ToLower(err.Error()), "secret") {
			t.Errorf("%s: the error quotes content: %v", name, err)
		}
	}
}

// TestMinifiedBundleNamesTheOtherPlace: a problem naming another place of
// the input ("a second Binary of this id, with other labels ... (the
// first at b.json:1)")
// named only file:1 of a minified Bundle for it, which names no entry.
// (An ErrConflict since 2026-12-06, an ErrID before.)
// Found by review (h-review16).
func TestMinifiedBundleNamesTheOtherPlace(t *testing.T) {
	bin := `{"resource":{"resourceType":"Binary","id":"b1","contentType":"text/plain","securityContext":{"reference":"Patient/p"},"data":"aGk="}}`
	other := strings.Replace(bin, `"contentType"`, `"meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HIV"}]},"contentType"`, 1)
	b := `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p"}},` + bin + `,` + other + `]}`
	path := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readAll(t, path)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "(the first at b.json:1, Bundle.entry[1])") || !strings.Contains(err.Error(), "(Bundle.entry[2])") {
		t.Errorf("err = %v, want the second Binary's error to name both entries", err)
	}
}

// A second Binary of an id with other labels or another securityContext
// than the first is one resource given twice, differently (ErrConflict): the error says
// so, names both places and quotes nothing of either (not the id: an
// error quotes no id). It read "Binary.id: missing or invalid id: a
// second Binary ..." (ErrID), of an id that is present and valid.
func TestReadBinaryGivenTwiceDifferentlyNamed(t *testing.T) {
	bin := `{"resourceType":"Binary","id":"SECRET-b1","contentType":"text/plain","securityContext":{"reference":"Patient/p"},"data":"aGk="}`
	other := strings.Replace(bin, `"Patient/p"`, `"Patient/q"`, 1)
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Binary.ndjson":  bin + "\n",
		"Patient.ndjson": `{"resourceType":"Patient","id":"p"}` + "\n" + `{"resourceType":"Patient","id":"q"}` + "\n",
		"b.json":         `{"resourceType":"Bundle","type":"collection","entry":[{"resource":` + other + `}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readAll(t, dir)
	var fe *Error
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrID) || !errors.As(err, &fe) || fe.Where != "b.json:1" || fe.Path != "Binary.id" {
		t.Fatalf("err = %v, want an ErrConflict at b.json:1, Binary.id", err)
	}
	msg := err.Error()
	for _, want := range []string{"given twice", "other labels or securityContext", "(the first at Binary.ndjson:1)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(msg, "missing or invalid id") || strings.Contains(msg, "SECRET") {
		t.Errorf("err = %v, want neither the sentinel of a missing or invalid id nor the id", err)
	}
}

// A DELETE url written from the root (/Patient/1, as Aidbox's examples
// write it) or with a query (Patient/1?_cascade=delete, HAPI's cascading
// delete, which deletes more than Patient/1) is refused, and the error
// says so: it said "conditional deletes are not imported", which neither
// is (probe-import3).
func TestDeleteURLFormsNamed(t *testing.T) {
	for url, want := range map[string]string{
		"/Patient/SECRET-1":                "from the root",
		"Patient/SECRET-1?_cascade=delete": "with a query",
		"Patient?identifier=SECRET-1":      "conditional deletes",
	} {
		err := readOne(t, `{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"`+url+`"}}]}`)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("DELETE %s: %v, want ErrUnsupported saying %q", url, err, want)
		}
	}
}

// A Bundle of a type custos does not import is refused naming its type
// when it is one of R4's (a message, a history, a batch-response: HL7's
// R4 examples hold them), and never quoting another: the error said only
// which types are imported before h-r4all.
func TestBundleTypeRefusalNamesTheType(t *testing.T) {
	for typ, want := range map[string]string{
		"message":              "a message Bundle is not imported",
		"history":              "a history Bundle is not imported",
		"transaction-response": "a transaction-response Bundle is not imported",
		"SECRET-MRN-1":         "a Bundle whose type is none of R4's is not imported",
	} {
		err := readOne(t, `{"resourceType":"Bundle","type":"`+typ+`","entry":[{"resource":{"resourceType":"Patient","id":"p"}}]}`)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrUnsupported) || fe.Path != "Bundle.type" {
			t.Fatalf("type %q: err = %v, want ErrUnsupported at Bundle.type", typ, err)
		}
		if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "SECRET") {
			t.Errorf("type %q: %v, want it to say %q and quote no other type", typ, err, want)
		}
	}
}

// readOne reads body, written to a file of its own, and returns Read's
// error.
func readOne(t *testing.T, body string) error {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readAll(t, p)
	return err
}
