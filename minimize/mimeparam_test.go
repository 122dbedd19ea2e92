package minimize_test

import (
	"strings"
	"testing"
)

// TestDeidentifyMIMEParameterHoldsNoName: a content type must be a media
// type custos knows (4ed84f4: a name as a MIME subtype was released), but
// its charset and fhirVersion parameters took any token, so a name or a
// plate after "charset=" was released with it ("text/plain;charset=
// EvelynMarsh"; found by this review probing the forms next to
// probe-deid's). A charset must be a character set's name, a fhirVersion a
// version number.
func TestDeidentifyMIMEParameterHoldsNoName(t *testing.T) {
	binary := func(ct string) string {
		return string(deidentifyAbout(t, []byte(`{"resourceType":"Binary","contentType":"`+ct+`","data":"aGVsbG8="}`), nil, ""))
	}
	for _, bad := range []string{"text/plain;charset=EvelynMarsh", "text/plain;charset=7XKR319", "application/fhir+json;fhirVersion=Marsh", "application/fhir+json;fhirVersion=1931.3.14"} {
		if out := binary(bad); strings.Contains(out, bad[strings.Index(bad, "=")+1:]) {
			t.Errorf("%s released: %s", bad, out)
		}
	}
	for _, good := range []string{"text/plain;charset=utf-8", "text/plain;charset=UTF-8", "text/html;charset=ISO-8859-1", "text/plain;charset=us-ascii", "text/plain;charset=windows-1252",
		"application/fhir+json;fhirVersion=4.0", "application/fhir+xml;fhirVersion=4.0.1", "application/fhir+json;fhirVersion=4.0;charset=utf-8"} {
		if out := binary(good); !strings.Contains(out, `"contentType":"`+good+`"`) {
			t.Errorf("%s dropped: %s", good, out)
		}
	}
}
