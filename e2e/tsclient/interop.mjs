#!/usr/bin/env node
// custos e2e interop probe: drives a custos server with the official
// TypeScript MCP SDK (v1 @modelcontextprotocol/sdk or v2
// @modelcontextprotocol/client) over Streamable HTTP or stdio and runs one
// scenario after another, recording each as {name, ok, ...} instead of
// stopping at the first failure. stdout carries ONE JSON object
// {sdk, transport, protocolVersion, scenarios[]}; diagnostics go to stderr.
//
// Usage: node interop.mjs (--url URL | --stdio-cmd JSON-ARRAY) [--sdk v1|v2]
//          [--protocol-version V] [--text URI] [--blob URI] [--denied URI]
//          [--missing URI] [--template T --argument NAME] [--subscribe URI]
//          [--expire-after-ms MS]
//
// --subscribe URI subscribes (resources/subscribe; 2026-07-28: a
// subscriptions/listen stream), prints the line "interop: subscribed" on
// stderr and waits up to 20 s for notifications/resources/updated of URI
// (the driver changes the resource when it sees that line).
// --expire-after-ms MS (HTTP, 2025-11-25 only): waits MS (longer than the
// server's session idle timeout), sends a request on the expired session,
// records what the client saw and whether it can initialize again.
// The bearer token comes only from CUSTOS_TOKEN; it is never printed.

import { parseArgs } from 'node:util';

const MODERN_FROM = '2026-07-28';
const token = process.env.CUSTOS_TOKEN ?? '';
const { values: o } = parseArgs({
    options: {
        url: { type: 'string' }, 'stdio-cmd': { type: 'string' }, sdk: { type: 'string' },
        'protocol-version': { type: 'string' }, text: { type: 'string' }, blob: { type: 'string' },
        denied: { type: 'string' }, missing: { type: 'string' }, template: { type: 'string' },
        argument: { type: 'string' }, subscribe: { type: 'string' }, 'expire-after-ms': { type: 'string' },
    },
});
const which = o.sdk ?? 'v1';
const pv = o['protocol-version'];
const modern = pv !== undefined && pv >= MODERN_FROM;
const scrub = (s) => (token === '' || typeof s !== 'string' ? s : s.split(token).join('[REDACTED]'));
const diag = (...a) => process.stderr.write(scrub(`interop: ${a.join(' ')}`) + '\n');

async function loadSdk() {
    if (which === 'v2') {
        const m = await import('@modelcontextprotocol/client');
        const s = await import('@modelcontextprotocol/client/stdio');
        return { ...m, RpcError: m.ProtocolError, Stdio: s.StdioClientTransport, updated: 'notifications/resources/updated' };
    }
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const t = await import('@modelcontextprotocol/sdk/types.js');
    return { Client, StreamableHTTPClientTransport, Stdio: StdioClientTransport, RpcError: t.McpError, ResourceUpdatedNotificationSchema: t.ResourceUpdatedNotificationSchema };
}
const sdk = await loadSdk();

// methods counts the JSON-RPC requests that reached the server over HTTP,
// by method (to tell a client-side cache hit from a round trip).
const methods = {};
async function countingFetch(url, init) {
    if (init?.method === 'POST' && typeof init.body === 'string') {
        try {
            const m = JSON.parse(init.body);
            for (const r of Array.isArray(m) ? m : [m]) if (r.method && r.id !== undefined) methods[r.method] = (methods[r.method] ?? 0) + 1;
        } catch { /* not ours to judge */ }
    }
    return fetch(url, init);
}

function errorRecord(err) {
    if (err instanceof sdk.RpcError) {
        const p = `MCP error ${err.code}: `;
        return { code: err.code, message: err.message.startsWith(p) ? err.message.slice(p.length) : err.message, data: err.data ?? null };
    }
    return { code: typeof err?.code === 'number' ? err.code : null, message: String(err?.message ?? err), type: err?.constructor?.name ?? typeof err };
}

function newTransport() {
    if (o['stdio-cmd']) {
        const [command, ...args] = JSON.parse(o['stdio-cmd']);
        return new sdk.Stdio({ command, args, env: process.env, stderr: 'inherit' });
    }
    const headers = token === '' ? {} : { Authorization: `Bearer ${token}` };
    return new sdk.StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers }, fetch: countingFetch });
}

let updates = [];
async function connect() {
    const opts = { capabilities: {} };
    if (which === 'v2' && pv !== undefined) {
        opts.supportedProtocolVersions = [pv];
        opts.versionNegotiation = { mode: modern ? { pin: pv } : 'legacy' };
    }
    const client = new sdk.Client({ name: 'custos-e2e-interop', version: '0.0.0' }, opts);
    client.onerror = (e) => diag('client error:', e?.message ?? e);
    const onUpdated = (n) => updates.push(n.params?.uri);
    if (which === 'v2') client.setNotificationHandler(sdk.updated, onUpdated);
    else client.setNotificationHandler(sdk.ResourceUpdatedNotificationSchema, onUpdated);
    const transport = newTransport();
    await client.connect(transport, { timeout: 20000 });
    return { client, transport };
}

const out = { sdk: which, transport: o['stdio-cmd'] ? 'stdio' : 'http', scenarios: [] };
async function scenario(name, fn) {
    try {
        const detail = await fn();
        out.scenarios.push({ name, ok: true, ...(detail ?? {}) });
    } catch (err) {
        out.scenarios.push({ name, ok: false, error: errorRecord(err) });
    }
}
const must = (cond, msg) => { if (!cond) throw new Error(msg); };

let c;
await scenario('connect', async () => {
    c = await connect();
    out.protocolVersion = (which === 'v2' ? c.client.getNegotiatedProtocolVersion() : c.transport.protocolVersion) ?? null;
    return { protocolVersion: out.protocolVersion, capabilities: c.client.getServerCapabilities() ?? null, session: c.transport.sessionId !== undefined };
});
if (!c) {
    process.stdout.write(scrub(JSON.stringify(out)) + '\n', () => process.exit(1));
} else {
    const { client } = c;
    await scenario('ping', async () => { await client.ping(); });
    await scenario('templates', async () => {
        const r = await client.listResourceTemplates({});
        return { count: r.resourceTemplates.length, ttlMs: r.ttlMs ?? null, cacheScope: r.cacheScope ?? null };
    });
    await scenario('list-all-pages', async () => {
        const uris = [];
        let cursor, pages = 0, ttlMs = null, cacheScope = null;
        do {
            const r = await client.listResources(cursor === undefined ? {} : { cursor });
            pages++;
            ttlMs = r.ttlMs ?? null; cacheScope = r.cacheScope ?? null;
            uris.push(...r.resources.map((x) => x.uri));
            cursor = r.nextCursor || undefined;
            must(pages < 1000, 'more than 1000 pages');
        } while (cursor !== undefined);
        must(new Set(uris).size === uris.length, 'a URI listed twice');
        return { pages, count: uris.length, ttlMs, cacheScope };
    });
    const read = async (uri, kind) => {
        const r = await client.readResource({ uri });
        const x = r.contents[0];
        must(x && x.uri === uri, `contents[0].uri ${x?.uri}`);
        if (kind === 'text') must(typeof x.text === 'string' && x.text.length > 0, 'no text');
        if (kind === 'blob') must(typeof x.blob === 'string' && Buffer.from(x.blob, 'base64').length > 0, 'no blob');
        return { mimeType: x.mimeType ?? null, bytes: kind === 'blob' ? Buffer.from(x.blob, 'base64').length : Buffer.byteLength(x.text), ttlMs: r.ttlMs ?? null, cacheScope: r.cacheScope ?? null };
    };
    if (o.text) await scenario('read-text', () => read(o.text, 'text'));
    if (o.blob) await scenario('read-blob', () => read(o.blob, 'blob'));
    if (o.text && modern) {
        await scenario('cache-hint-honoured', async () => {
            const before = methods['resources/read'] ?? 0;
            await client.readResource({ uri: o.text });
            return { roundTrips: (methods['resources/read'] ?? 0) - before };
        });
    }
    if (modern) {
        // templates carry ttlMs 60000 on 2026-07-28: a second list is served
        // from the client's cache.
        await scenario('templates-cached', async () => {
            const before = methods['resources/templates/list'] ?? 0;
            await client.listResourceTemplates({});
            return { roundTrips: (methods['resources/templates/list'] ?? 0) - before };
        });
    }
    const failing = (uri) => async () => {
        try { await client.readResource({ uri }, { cacheMode: 'bypass' }); } catch (err) { return { error: errorRecord(err) }; }
        throw new Error('read succeeded');
    };
    if (o.denied) await scenario('read-denied', failing(o.denied));
    if (o.missing) await scenario('read-missing', failing(o.missing));
    await scenario('read-malformed-uri', failing('fhir://general-hospital/patients/../../etc/passwd'));
    await scenario('read-not-a-uri', failing('not a uri'));
    // A non-ASCII URI: on 2026-07-28 the client names it in the Mcp-Name
    // header in the revision's Base64 form (SEP-2243).
    await scenario('read-non-ascii-uri', failing('fhir://general-hospital/patients/J\u00f6rg'));
    // An empty URI: on 2026-07-28 no Mcp-Name header can match it.
    await scenario('read-empty-uri', failing(''));
    if (o.template) {
        await scenario('complete', async () => {
            const r = await client.complete({ ref: { type: 'ref/resource', uri: o.template }, argument: { name: o.argument, value: '' } });
            must(r.completion.values.length > 0, 'no completion values');
            return { values: r.completion.values.length, hasMore: r.completion.hasMore ?? null };
        });
    }
    if (o.subscribe) {
        await scenario('subscribe-updated', async () => {
            let sub;
            if (modern) sub = await client.listen({ resourceSubscriptions: [o.subscribe] });
            else await client.subscribeResource({ uri: o.subscribe });
            diag('subscribed');
            const deadline = Date.now() + 20000;
            while (!updates.includes(o.subscribe) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
            if (sub) await sub.close();
            else await client.unsubscribeResource({ uri: o.subscribe });
            must(updates.includes(o.subscribe), `no update within 20 s (got ${JSON.stringify(updates)})`);
            return { updates: updates.length };
        });
    }
    if (o['expire-after-ms']) {
        await scenario('expired-session', async () => {
            const old = c.transport.sessionId;
            await new Promise((r) => setTimeout(r, Number(o['expire-after-ms'])));
            let seen = null;
            try { await client.listResources({}); seen = 'ok'; } catch (err) { seen = errorRecord(err); }
            const again = await connect();
            const r = await again.client.listResources({});
            const fresh = again.transport.sessionId;
            await again.client.close();
            return { onExpired: seen, sameSessionAfter: c.transport.sessionId === old, newSession: fresh !== undefined && fresh !== old, relisted: r.resources.length };
        });
    }
    out.requests = methods;
    try { await client.close(); } catch { /* closed */ }
    process.stdout.write(scrub(JSON.stringify(out)) + '\n', () => process.exit(0));
}
