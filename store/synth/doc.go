// Package synth generates the deterministic synthetic data set behind
// `custos seed --out DIR --patients N [--seed S]`.
//
// Responsibility: write a directory that `custos import` loads: one
// resource file per resource plus a manifest that names each one with its
// URI, MCP metadata and policy labels. The store package parses it; the
// manifest format below is the contract between the two.
//
// Synthetic only, never real PHI. Every name, address, phone number, e-mail
// address, MRN and SSN is drawn from small embedded lists or formats that
// cannot belong to a real person: phones in the reserved 555-01xx block,
// e-mail at example.com, SSNs with area numbers 900-999 (never issued).
// Clinical codes (LOINC, SNOMED CT, ICD-10-CM, RxNorm) are illustrative.
//
// # Invariants
//
//   - Determinism: the output tree is a pure function of [Options] (Patients,
//     Seed, Tenant, Now); two runs with equal options produce byte-identical
//     files. Nothing reads the wall clock, the environment or map order.
//     Patient #i draws from its own PCG stream seeded from (Seed, i), so
//     patients are generated in parallel and written to the manifest in
//     index order. UUIDs are 16 bytes from that stream shaped as version 4.
//   - [Estimate](N) equals the number of manifest lines for N patients for
//     every seed: the per-patient resource counts depend only on the index.
//   - A data set is complete or has no manifest: manifest.jsonl is streamed
//     to a temporary file and renamed into place after everything else is
//     written. A failed or cancelled run removes the temporary manifest but
//     may leave resource files behind; delete the directory and run again.
//     [Generate] refuses a non-empty directory.
//   - Titles, names and descriptions in the manifest name only the resource
//     kind ("Observation (laboratory result)", "observation-1a2b3c4d"),
//     never an identifier, so a list never discloses more than a read.
//   - Memory is bounded: at most 256 patients' manifest lines are held at
//     once; file contents are written as each patient is generated.
//
// # Layout
//
//	manifest.jsonl        one JSON object per line (field order fixed):
//	                      {"uri","name","title","description","mimeType",
//	                       "annotations":{"audience","priority","lastModified"},
//	                       "labels":{"tenant","patient","type","sensitivity"?,"consent"?},
//	                       "file"}
//	fhir/<id>.json        FHIR R4 Patient, Observation, Condition,
//	                      MedicationRequest, Encounter, Coverage, and the
//	                      payers' Organizations (tenant-level reference
//	                      data, fhir://{tenant}/organization/{id}, after
//	                      every patient; each Coverage's payor references
//	                      one; in the Bulk export, and in bundles/ as
//	                      organizations.json)
//	notes/<id>.md         clinical progress note (text/markdown)
//	reports/<id>.pdf      one-page PDF 1.4 lab report (every 5th patient)
//	images/<id>.png       32x32 grayscale PNG (every 5th patient)
//	principals/*.json     example principals: clinician, clinician-hiv,
//	                      billing, researcher, auditor, outsider
//	SUMMARY.json          {"patients","resources","by_type","edge_cases"}
//	bulk/<Type>.ndjson    the same data set as a FHIR Bulk Data export: the
//	                      FHIR resources as above, notes as DocumentReference,
//	                      reports as DiagnosticReport.presentedForm, images as
//	                      Media (base64 attachments), labels in meta.security
//	                      (ActCode HIV, 42CFRPart2, CELEB), and an active
//	                      Consent that denies for the opted-out patient
//	bulk-export.json      its $export manifest (relative urls)
//	bundles/<patient>.json the same resources, one transaction Bundle per
//	                      patient, references between entries as urn:uuid,
//	                      and bundles/organizations.json the payers
//
// URIs: fhir://{tenant}/patients/{patient}/{type}/{id} with type one of
// patient, observation, condition, medicationrequest, encounter, coverage
// (for the Patient resource id is the patient id);
// fhir://{tenant}/organization/{id} for the payers (tenant-level);
// note://{tenant}/patients/{patient}/notes/{id};
// report://{tenant}/patients/{patient}/reports/{id};
// image://{tenant}/patients/{patient}/images/{id}.
//
// Per patient #i: 1 Patient, 2+i%3 Observations, 1 or 2 Conditions (2 when
// i%3 == 1), 1 MedicationRequest, 1 or 2 Encounters (2 when i%4 == 0),
// 1 Coverage, 1 note, and when i%5 == 0 a report and an image: 9.98
// resources per patient on average; and, once, the 4 payers.
//
// # Edge cases
//
// The first patients are the edge cases, in this order (with fewer than six
// patients only the first N exist). SUMMARY.json maps each name to the
// patient id.
//
//	index  name             what is special
//	0      aged_92          birthDate makes the patient 92 at Now (everyone else is 18-85)
//	1      vip              labels.sensitivity ["vip"] on every resource of the patient
//	2      opted_out        labels.consent ["opt-out"] on every resource of the patient
//	3      hiv              first Condition is HIV (B20); that Condition, the
//	                        MedicationRequest (antiretroviral) and the note carry ["hiv"]
//	4      sud              first Condition is opioid use disorder (F11.20, 42 CFR Part 2);
//	                        that Condition, the MedicationRequest and the note carry ["sud"]
//	5      zip3_restricted  postal code in ZIP3 036 (population <= 20,000; see RestrictedZIP3)
//
// The clinician principals have care relationships with the first half of
// the patients (rounded up) and never fewer than the edge-case patients, so
// the opt-out and VIP patients are within their care team and only policy
// decides what they may see.
package synth
