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
