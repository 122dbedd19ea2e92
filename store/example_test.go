package store_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/custos-mcp/custos/store"
)

func ExampleParseURI() {
	u, err := store.ParseURI("fhir://general-hospital/patients/0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f/observation/3f2a9c1e-8b7d-4e6f-a5b4-c3d2e1f0a9b8")
	if err != nil {
		panic(err)
	}
	fmt.Println(u.Scheme, u.Tenant, u.Type, u.MIMEType())

	// Secrets in userinfo or a query are rejected and never echoed.
	_, err = store.ParseURI("fhir://admin:hunter2@general-hospital/patients/0b5c1f7e-3c2a-4d7e-9f10-2a3b4c5d6e7f/observation/3f2a9c1e-8b7d-4e6f-a5b4-c3d2e1f0a9b8")
	fmt.Println(errors.Is(err, store.ErrBadURI), err)
	// Output:
	// fhir general-hospital observation application/fhir+json
	// true store: bad uri: uri has userinfo (credentials are never accepted in a uri)
}

func ExampleTemplates() {
	for _, t := range store.Templates() {
		fmt.Println(strings.TrimSpace(t.URITemplate + " " + t.MIMEType)) // attachments: MIME type per resource
	}
	// Output:
	// fhir://{tenant}/patients/{patient}/{type}/{id} application/fhir+json
	// fhir://{tenant}/{type}/{id} application/fhir+json
	// note://{tenant}/patients/{patient}/notes/{id} text/markdown
	// report://{tenant}/patients/{patient}/reports/{id} application/pdf
	// image://{tenant}/patients/{patient}/images/{id} image/png
	// attachment://{tenant}/patients/{patient}/attachments/{id}
	// attachment://{tenant}/attachments/{id}
}

func ExampleDigest() {
	fmt.Println(store.Digest([]byte("abc")))
	// Output:
	// sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
}

// A Namer names source resources by keyed ids: the URI never carries the
// source id (here an MRN), and the same source resource always gets the
// same URI under the same key.
func ExampleNamer_Link() {
	key := []byte("an example id key, 32 bytes long") // from the secrets provider in production
	n, err := store.NewNamer("general-hospital", key, "example:id-key@1")
	if err != nil {
		panic(err)
	}
	fmt.Println(n.Link("Patient", "MRN-000123", ""))
	fmt.Println(n.Link("Organization", "org-1", ""))
	fmt.Println(n.Link("Observation", "obs-1", "MRN-000123") == n.Link("Observation", "obs-1", "MRN-000123"))
	// Output:
	// fhir://general-hospital/patients/cec2d922-aa43-8001-b70d-1897d762d23e/patient/cec2d922-aa43-8001-b70d-1897d762d23e
	// fhir://general-hospital/organization/4e229262-ea7a-8c7b-873d-f6841629d687
	// true
}
