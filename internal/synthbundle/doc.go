// Package synthbundle writes large synthetic FHIR R4 transaction Bundles
// for measuring and testing how the importer's memory grows with a
// Bundle's size (docs/benchmarks.md, "A large Bundle's memory").
//
// A Bundle is shaped like Synthea's population exports: pretty-printed,
// every entry with a urn:uuid fullUrl and a POST request, and per patient
// one Patient, Encounters, Conditions, Observations and a
// DocumentReference with a base64 clinical note, each referring to its
// Patient and Encounter by their fullUrls (references between entries,
// which a reader must resolve before it yields any entry). The data is
// made up and deterministic: the same Options write the same bytes.
//
// It does no I/O of its own beyond the io.Writer it is given.
package synthbundle
