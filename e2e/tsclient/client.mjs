#!/usr/bin/env node
// custos e2e client: drives a custos server with the official TypeScript MCP
// SDK over Streamable HTTP and prints ONE JSON object describing what it saw.
//
// Usage: node client.mjs --url URL [--read URI]... [--max-pages N] [--timeout-ms MS]
//                         [--sdk v1|v2] [--protocol-version V]
//
// --sdk v1 (the default) drives @modelcontextprotocol/sdk (1.x, which speaks
// the 2025 revisions and offers its latest, 2025-11-25); --sdk v2 drives
// @modelcontextprotocol/client (2.x, the same TypeScript SDK split into
// packages), which also speaks the stateless 2026-07-28 revision: with
// --protocol-version 2026-07-28 it is pinned to that revision (server/discover,
// no initialize, no session, no fallback); with a 2025 revision it runs the
// plain initialize handshake offering exactly that revision. A server behind a
// self-signed certificate is trusted with NODE_EXTRA_CA_CERTS=cert.pem, which
// node reads at start-up and its fetch honours.
//
// The bearer token is read from the CUSTOS_TOKEN environment variable (never
// from argv). When it is unset or empty no Authorization header is sent.
// stdout carries exactly one JSON object; diagnostics go to stderr. The token
// is never printed: every string in the output is scrubbed of it as a last
// line of defence.
//
// Exit status: 0 after a completed run (individual request errors are
// recorded in the JSON, not fatal); 1 with {"fatal": ...} when connecting or
// initializing fails; 2 with {"fatal": ...} on a usage error.

import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

import { readFileSync } from 'node:fs';

const USAGE = 'usage: node client.mjs --url URL [--read URI]... [--max-pages N] [--timeout-ms MS] [--sdk v1|v2] [--protocol-version V]';
const MODERN_FROM = '2026-07-28'; // the first stateless revision (dates compare as strings)

// The SDK in use, set by loadSdk: the Client and transport classes, the class
// of JSON-RPC error responses, and the package's name and version.
let sdk;

async function loadSdk(which) {
    if (which === 'v2') {
        const m = await import('@modelcontextprotocol/client');
        const name = '@modelcontextprotocol/client';
        return { Client: m.Client, Transport: m.StreamableHTTPClientTransport, RpcError: m.ProtocolError, name, version: pkgVersion(name) };
    }
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { McpError, LATEST_PROTOCOL_VERSION } = await import('@modelcontextprotocol/sdk/types.js');
    const name = '@modelcontextprotocol/sdk';
    return { Client, Transport: StreamableHTTPClientTransport, RpcError: McpError, name, version: pkgVersion(name), latest: LATEST_PROTOCOL_VERSION };
}

// pkgVersion reads an installed package's version from its package.json
// under this script's node_modules (package exports hide package.json).
function pkgVersion(name) {
    try {
        return JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')).version ?? null;
    } catch {
        return null;
    }
}

const BAD_CURSOR = 'not-a-cursor';

const token = process.env.CUSTOS_TOKEN ?? '';

// scrub replaces every occurrence of the token in s (defence in depth: no
// server should ever echo it, but nothing of ours may print it either).
function scrub(s) {
    if (typeof s !== 'string' || token === '') return s;
    return s.split(token).join('[REDACTED]');
}

function diag(...parts) {
    process.stderr.write(scrub(`tsclient: ${parts.join(' ')}`) + '\n');
}

// emit writes obj as the single stdout line and exits with code once it is flushed.
function emit(obj, code) {
    const text = scrub(JSON.stringify(obj));
    process.stdout.write(text + '\n', () => process.exit(code));
}

function fatal(message, code, extra = {}) {
    emit({ fatal: String(message), ...extra }, code);
}

function sha256Hex(buf) {
    return createHash('sha256').update(buf).digest('hex');
}

// errorRecord turns a thrown value into {code, message, data}. For an McpError
// (a JSON-RPC error response) message is the server's own message, without
// the SDK's "MCP error <code>: " prefix. Other errors (HTTP status errors from
// the transport, timeouts, schema failures) keep whatever numeric code they
// carry (e.g. the HTTP status) and name their class in "type".
function errorRecord(err) {
    if (err instanceof sdk.RpcError) {
        const prefix = `MCP error ${err.code}: `;
        const message = err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message;
        return { code: err.code, message, data: err.data ?? null };
    }
    let message = String(err?.message ?? err);
    const cause = err?.cause;
    if (cause) message += ` (${cause.code ?? cause.message ?? cause})`;
    const rec = {
        code: typeof err?.code === 'number' ? err.code : null,
        message,
        data: null,
    };
    rec.type = err?.constructor?.name ?? typeof err;
    return rec;
}

function parseCli(argv) {
    const { values } = parseArgs({
        args: argv,
        options: {
            url: { type: 'string' },
            read: { type: 'string', multiple: true },
            'max-pages': { type: 'string' },
            'timeout-ms': { type: 'string' },
            sdk: { type: 'string' },
            'protocol-version': { type: 'string' },
            help: { type: 'boolean', short: 'h' },
        },
        strict: true,
        allowPositionals: false,
    });
    if (values.help) {
        process.stderr.write(USAGE + '\n');
        process.exit(0);
    }
    if (!values.url) throw new Error('--url is required');
    let url;
    try {
        url = new URL(values.url);
    } catch {
        throw new Error(`--url is not a valid URL: ${values.url}`);
    }
    const posInt = (name, raw, dflt) => {
        if (raw === undefined) return dflt;
        if (!/^[1-9][0-9]*$/.test(raw)) throw new Error(`--${name} must be a positive integer, got ${raw}`);
        return Number(raw);
    };
    const which = values.sdk ?? 'v1';
    if (which !== 'v1' && which !== 'v2') throw new Error(`--sdk must be v1 or v2, got ${which}`);
    const pv = values['protocol-version'];
    if (pv !== undefined && !/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(pv)) throw new Error(`--protocol-version must be a revision date, got ${pv}`);
    if (pv !== undefined && pv >= MODERN_FROM && which !== 'v2') throw new Error(`--protocol-version ${pv} needs --sdk v2`);
    return {
        url,
        sdk: which,
        protocolVersion: pv,
        reads: values.read ?? [],
        maxPages: posInt('max-pages', values['max-pages'], 1000),
        timeoutMs: posInt('timeout-ms', values['timeout-ms'], 30000),
    };
}

// paginate calls fetchPage(cursor) until nextCursor is exhausted or maxPages
// pages have been fetched. It never throws: a failing page ends the walk and
// is recorded in "error".
async function paginate(fetchPage, maxPages) {
    const pages = [];
    let cursor;
    let error = null;
    let complete = false;
    while (pages.length < maxPages) {
        let res;
        try {
            res = await fetchPage(cursor);
        } catch (err) {
            error = errorRecord(err);
            diag('list failed after', pages.length, 'page(s):', error.message);
            break;
        }
        const next = res.nextCursor;
        pages.push({ res, nextCursor: next === undefined || next === '' ? null : next });
        if (next === undefined || next === '') {
            complete = true;
            break;
        }
        cursor = next;
    }
    return { pages, complete, error };
}

async function readOne(client, uri, reqOpts) {
    try {
        const res = await client.readResource({ uri }, reqOpts);
        const contents = (res.contents ?? []).map((c) => {
            if (typeof c.text === 'string') {
                const bytes = Buffer.from(c.text, 'utf8');
                return {
                    uri: c.uri,
                    mimeType: c.mimeType ?? null,
                    kind: 'text',
                    length: [...c.text].length,
                    bytes: bytes.length,
                    sha256: sha256Hex(bytes),
                };
            }
            const bytes = Buffer.from(typeof c.blob === 'string' ? c.blob : '', 'base64');
            return {
                uri: c.uri,
                mimeType: c.mimeType ?? null,
                kind: 'blob',
                length: bytes.length,
                bytes: bytes.length,
                sha256: sha256Hex(bytes),
            };
        });
        return { uri, ok: true, contents };
    } catch (err) {
        const error = errorRecord(err);
        diag('read failed:', error.code, error.message);
        return { uri, ok: false, error };
    }
}

async function main() {
    let opts;
    try {
        opts = parseCli(process.argv.slice(2));
    } catch (err) {
        process.stderr.write(USAGE + '\n');
        fatal(`usage: ${err.message}`, 2);
        return;
    }
    const reqOpts = { timeout: opts.timeoutMs };
    sdk = await loadSdk(opts.sdk);
    if (opts.sdk === 'v1' && opts.protocolVersion !== undefined && opts.protocolVersion !== sdk.latest) {
        fatal(`usage: ${sdk.name} ${sdk.version} offers only ${sdk.latest}; use --sdk v2 for ${opts.protocolVersion}`, 2);
        return;
    }

    const headers = {};
    if (token !== '') headers.Authorization = `Bearer ${token}`;
    const transport = new sdk.Transport(opts.url, { requestInit: { headers } });
    const clientOpts = { capabilities: {} };
    if (opts.sdk === 'v2' && opts.protocolVersion !== undefined) {
        clientOpts.supportedProtocolVersions = [opts.protocolVersion];
        clientOpts.versionNegotiation = { mode: opts.protocolVersion >= MODERN_FROM ? { pin: opts.protocolVersion } : 'legacy' };
    }
    const client = new sdk.Client({ name: 'custos-e2e-tsclient', version: '0.0.0' }, clientOpts);
    let closing = false;
    client.onerror = (err) => {
        if (!closing) diag('client error:', err?.message ?? err);
    };

    try {
        await client.connect(transport, reqOpts);
    } catch (err) {
        const rec = errorRecord(err);
        diag('connect failed:', rec.message);
        const extra = {};
        if (rec.code !== null) extra.code = rec.code;
        try {
            await client.close();
        } catch {
            // already closed by the SDK on initialize failure
        }
        fatal(rec.message, 1, extra);
        return;
    }

    const out = {
        sdk: { name: sdk.name, version: sdk.version },
        protocolVersion: (opts.sdk === 'v2' ? client.getNegotiatedProtocolVersion() : transport.protocolVersion) ?? null,
        serverInfo: client.getServerVersion() ?? null,
        serverCapabilities: client.getServerCapabilities() ?? null,
        hasSession: transport.sessionId !== undefined,
    };

    // 2. resources/templates/list, all pages.
    const tpl = await paginate((cursor) => client.listResourceTemplates(cursor === undefined ? {} : { cursor }, reqOpts), opts.maxPages);
    out.templates = {
        pageCount: tpl.pages.length,
        complete: tpl.complete,
        error: tpl.error,
        items: tpl.pages.flatMap((p) =>
            (p.res.resourceTemplates ?? []).map((t) => ({
                uriTemplate: t.uriTemplate,
                name: t.name,
                mimeType: t.mimeType ?? null,
                annotations: t.annotations ?? null,
            })),
        ),
    };

    // 3. resources/list, following nextCursor up to --max-pages pages.
    const lst = await paginate((cursor) => client.listResources(cursor === undefined ? {} : { cursor }, reqOpts), opts.maxPages);
    out.resources = {
        pageCount: lst.pages.length,
        complete: lst.complete,
        error: lst.error,
        pages: lst.pages.map((p) => ({
            uris: (p.res.resources ?? []).map((r) => r.uri),
            nextCursor: p.nextCursor,
        })),
        items: lst.pages.flatMap((p) =>
            (p.res.resources ?? []).map((r) => {
                const item = {
                    uri: r.uri,
                    name: r.name,
                    mimeType: r.mimeType ?? null,
                    annotations: r.annotations ?? null,
                };
                if (typeof r.size === 'number') item.size = r.size;
                return item;
            }),
        ),
    };

    // 4. resources/read for each --read URI; failures are recorded, not fatal.
    out.reads = [];
    for (const uri of opts.reads) {
        out.reads.push(await readOne(client, uri, reqOpts));
    }

    // 5. resources/list with a garbage cursor: expected to fail with -32602.
    try {
        const res = await client.listResources({ cursor: BAD_CURSOR }, reqOpts);
        out.badCursor = { cursor: BAD_CURSOR, ok: true, resourceCount: (res.resources ?? []).length };
    } catch (err) {
        out.badCursor = { cursor: BAD_CURSOR, ok: false, error: errorRecord(err) };
    }

    // 6. Close politely (DELETE the session when there is one), then print.
    closing = true;
    if (transport.sessionId !== undefined) {
        try {
            await transport.terminateSession();
        } catch (err) {
            diag('terminate session failed:', err?.message ?? err);
        }
    }
    try {
        await client.close();
    } catch (err) {
        diag('close failed:', err?.message ?? err);
    }
    emit(out, 0);
}

main().catch((err) => {
    diag('unexpected failure:', err?.stack ?? err);
    fatal(err?.message ?? String(err), 1);
});
