// Package jsonkeys finds a JSON object member whose name repeats an
// earlier member's of the same object, for inputs that different parsers
// would read differently: a FHIR resource (fhirin) and a signed policy
// bundle's manifest (policy).
//
// Invariant: Duplicate reports a repeat exactly when one object of a valid
// JSON text has two member names equal under Unicode case folding, after
// their escapes are decoded ("\u0061" is "a"; FuzzDuplicate holds it
// against encoding/json's tokens). Names that differ only in case count:
// Go's struct decode matches member names case-insensitively and takes one
// for the other, and a generic decode keeps both or the last. Text that is
// not JSON is scanned leniently and left to the caller's decoder. The scan
// is pure and allocates only for a name with an escape and for an object
// of many members.
package jsonkeys
