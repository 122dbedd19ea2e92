package fhirin_test

import (
	"context"
	"testing"

	"github.com/custos-mcp/custos/fhirin"
)

// TestReadOutside2Examples reads the h-outside2 probe's outside-shaped
// resources (minimize/testdata/outside2/fhir, README.md beside it: CARIN Blue
// Button, US Core, mCODE, UDI, DICOM, Synthea shapes) as custos import
// does. All of them are valid FHIR R4 and must be read: the US Core
// DocumentReference's C-CDA, which has no XML declaration, was refused
// ("the bytes are text/plain, not application/xml") and failed the whole
// import until h-outside2.
func TestReadOutside2Examples(t *testing.T) {
	types := map[string]int{}
	var ccda string
	for _, it := range readProbe(t, "outside2") {
		types[it.Type]++
		if it.Type == "Attachment" {
			ccda = it.MIMEType
		}
	}
	if n := len(types); n != 20 || types["ExplanationOfBenefit"] != 4 || types["Device"] != 2 {
		t.Errorf("read %v, want 20 types (the attachment one), 4 ExplanationOfBenefits, 2 Devices and an attachment", types)
	}
	if ccda != "application/xml" {
		t.Errorf("the C-CDA attachment is listed as %q, want application/xml", ccda)
	}
}

// readProbe reads an outside probe's fixtures (minimize/testdata/NAME/fhir)
// as custos import does, failing the test on any refusal, and returns the
// items read.
func readProbe(t *testing.T, name string) []fhirin.Item {
	t.Helper()
	link := func(typ, id, patient string) string { return "attachment://demo/attachments/placeholder" }
	var items []fhirin.Item
	err := fhirin.Read(context.Background(), "../minimize/testdata/"+name+"/fhir", fhirin.Options{Link: link}, func(it fhirin.Item) error {
		items = append(items, it)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items
}
