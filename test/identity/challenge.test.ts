/**
 * A 401 says how to authenticate (issue 31, item 5): every 401 of the HTTP port (the API,
 * watch refusals, MCP) carries `WWW-Authenticate: Bearer realm="kslate"` (RFC 6750 §3), with
 * `error="invalid_token"` when a token was sent. With `--identity oidc` the gateway serves
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) naming the issuer, and the 401 points at it,
 * so an MCP client that implements the MCP authorization spec signs in at the issuer. With API
 * keys there is no metadata, and the MCP Inspector's CLI given a wrong key shows kslate's
 * message without starting an OAuth flow. Real gateways, a fake issuer at the network edge,
 * the MCP SDK's client and the Inspector's CLI as published.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { AUD, fakeIssuer } from './fake-issuer.js';

type Line = { msg: string; data: Record<string, unknown> };
const lines: Line[] = [];
const capture = (msg: string, data: Record<string, unknown> = {}) => void lines.push({ msg, data });
const log = { debug: capture, info: capture, warn: capture, error: capture };
/** The paths the gateway was asked for, from its access log. */
const asked = () => lines.filter((l) => l.msg === 'request').map((l) => `${l.data.method} ${l.data.path}`);

let keys: TestGateway;
let oidc: TestGateway;
let issuer: Awaited<ReturnType<typeof fakeIssuer>>;

beforeAll(async () => {
  issuer = await fakeIssuer();
  keys = await startTestGateway([incident], { log });
  oidc = await startTestGateway([incident], {
    extraArgs: ['--identity', 'oidc,apikey', '--oidc-issuer', issuer.url, '--oidc-audience', AUD, '--trust-proxy', '1'],
  });
});
afterAll(async () => {
  await keys?.close();
  await oidc?.close();
  await issuer?.close();
});

const JSON_RPC = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});

/** The requests of every kind the HTTP port answers 401 for: operations, a watch, MCP and its session endpoint. */
const REFUSED: [string, string, string | undefined, Record<string, string>][] = [
  ['GET', '/v1/classes', undefined, {}],
  ['PUT', '/v1/records/incident/a/fields/title', '{"value":1,"expected_version":0}', { 'content-type': 'application/json' }],
  ['GET', '/v1/records/incident/a/watch', undefined, {}],
  ['POST', '/mcp', INITIALIZE, JSON_RPC],
  ['GET', '/mcp', undefined, { accept: 'text/event-stream' }],
  ['POST', '/mcp/session', INITIALIZE, JSON_RPC],
];

async function challenge(base: string, method: string, path: string, body: string | undefined, headers: Record<string, string>) {
  const res = await fetch(base + path, { method, headers, body });
  const json = await res.json();
  expect(res.status, `${method} ${path}`).toBe(401);
  expect(json.error, `${method} ${path}`).toBe('UNAUTHENTICATED');
  return res.headers.get('www-authenticate');
}

describe('with API keys', () => {
  it('every 401 carries WWW-Authenticate: Bearer realm="kslate", with error="invalid_token" when a token was sent', async () => {
    for (const [method, path, body, headers] of REFUSED) {
      expect(await challenge(keys.url, method, path, body, headers), `${method} ${path}, no credential`).toBe('Bearer realm="kslate"');
      expect(await challenge(keys.url, method, path, body, { ...headers, authorization: 'Bearer not-a-key' }), `${method} ${path}, a wrong key`).toBe(
        'Bearer realm="kslate", error="invalid_token"',
      );
    }
    // No bearer token was sent (another scheme, an empty token): no error code (RFC 6750 §3.1).
    expect(await challenge(keys.url, 'GET', '/v1/classes', undefined, { authorization: 'Basic YWxpY2U6eA==' })).toBe('Bearer realm="kslate"');
    expect(await challenge(keys.url, 'GET', '/v1/classes', undefined, { authorization: 'Bearer ' })).toBe('Bearer realm="kslate"');
  });

  it('no protected resource metadata: 404 saying which credential to send, and no 401 points at one', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const r = await keys.call(null, 'GET', path);
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('NOT_FOUND');
      expect(r.body.message).toMatch(/no OAuth authorization server.*--identity apikey.*Authorization: Bearer <token>/);
    }
  });

  it('the MCP Inspector CLI given a wrong key shows kslate\'s message and starts no OAuth flow; with the key it lists the tools', async () => {
    const before = asked().length;
    const wrong = await inspector(keys.url, 'Bearer not-a-key');
    expect(wrong.code).not.toBe(0);
    expect(wrong.out).toContain('credential not accepted by any identity provider (tried: apikey)');
    // No OAuth discovery, registration or authorization request reached the gateway: only /mcp.
    expect(asked().slice(before).filter((r) => !r.endsWith(' /mcp'))).toEqual([]);

    const right = await inspector(keys.url, `Bearer ${KEYS.alice}`);
    expect(right.code, right.out).toBe(0);
    const tools = JSON.parse(right.stdout).result.tools.map((tl: { name: string }) => tl.name);
    expect(tools).toEqual(expect.arrayContaining(['svc_get', 'svc_put', 'svc_append', 'svc_claim', 'svc_checkpoint', 'svc_query']));
  }, 60_000);
});

describe('with --identity oidc', () => {
  it('the 401 names the protected resource metadata of what was asked for (RFC 9728 §5.1)', async () => {
    const origin = oidc.url;
    const meta = (suffix: string) => `resource_metadata="${origin}/.well-known/oauth-protected-resource${suffix}"`;
    expect(await challenge(origin, 'GET', '/v1/classes', undefined, {})).toBe(`Bearer realm="kslate", ${meta('')}`);
    expect(await challenge(origin, 'POST', '/mcp', INITIALIZE, { ...JSON_RPC, authorization: 'Bearer nope' })).toBe(
      `Bearer realm="kslate", error="invalid_token", ${meta('/mcp')}`,
    );
    expect(await challenge(origin, 'POST', '/mcp/session', INITIALIZE, JSON_RPC)).toBe(`Bearer realm="kslate", ${meta('/mcp/session')}`);
  });

  it('serves the metadata naming the issuer, for the API and each MCP endpoint, without a credential', async () => {
    for (const resource of ['', '/mcp', '/mcp/session']) {
      const r = await oidc.call(null, 'GET', `/.well-known/oauth-protected-resource${resource}`);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        resource: oidc.url + resource,
        authorization_servers: [issuer.url],
        bearer_methods_supported: ['header'],
        resource_name: 'kslate',
      });
    }
  });

  it('behind a trusted TLS-terminating proxy the metadata names the public origin', async () => {
    const proxied = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'kslate.example.com' };
    const r = await oidc.call(null, 'GET', '/.well-known/oauth-protected-resource/mcp', undefined, proxied);
    expect(r.body.resource).toBe('https://kslate.example.com/mcp');
    expect(await challenge(oidc.url, 'POST', '/mcp', INITIALIZE, { ...JSON_RPC, ...proxied })).toBe(
      'Bearer realm="kslate", resource_metadata="https://kslate.example.com/.well-known/oauth-protected-resource/mcp"',
    );
  });

  it("an MCP client that implements the authorization spec is sent to the issuer to sign in, for this gateway's /mcp", async () => {
    let sentTo: URL | undefined;
    const provider: OAuthClientProvider = {
      redirectUrl: 'http://127.0.0.1:1/callback',
      clientMetadata: { client_name: 'kslate-test', redirect_uris: ['http://127.0.0.1:1/callback'] },
      clientInformation: () => ({ client_id: 'kslate-test-client' }),
      tokens: () => undefined,
      saveTokens: () => undefined,
      redirectToAuthorization: (url) => void (sentTo = url),
      saveCodeVerifier: () => undefined,
      codeVerifier: () => 'verifier',
    };
    const client = new Client({ name: 'kslate-test', version: '0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${oidc.url}/mcp`), { authProvider: provider });
    await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    await client.close().catch(() => undefined);
    expect(sentTo?.origin).toBe(issuer.url);
    expect(sentTo?.pathname).toBe('/authorize');
    expect(sentTo?.searchParams.get('client_id')).toBe('kslate-test-client');
    // RFC 8707: the token is asked for this gateway's MCP endpoint (docs/identity.md: the audience).
    expect(sentTo?.searchParams.get('resource')).toBe(`${oidc.url}/mcp`);
    expect(issuer.requests).toContain('GET /.well-known/openid-configuration');
  });
});

/** The Inspector's CLI (devDependency @modelcontextprotocol/inspector), as `npx @modelcontextprotocol/inspector --cli` runs it. */
function inspector(base: string, authorization: string): Promise<{ code: number; stdout: string; out: string }> {
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve('@modelcontextprotocol/inspector/package.json'));
  const home = mkdtempSync(join(tmpdir(), 'kslate-inspector-'));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        join(root, 'clients/launcher/build/index.js'),
        '--cli',
        `${base}/mcp`,
        '--transport',
        'http',
        '--method',
        'tools/list',
        '--header',
        `Authorization: ${authorization}`,
        // The Inspector's way for a run without a person at the keyboard (its docs/cli-smoke-testing.md):
        // never open a browser; without it, any 401 makes its CLI want an interactive login.
        '--stored-auth-only',
        '--format',
        'json',
      ],
      // Its own files (catalog, OAuth store) in a temporary home; secrets in memory, no keychain.
      { env: { ...process.env, HOME: home, MCP_INSPECTOR_SECRET_STORE: 'memory' }, timeout: 45_000 },
      (err, stdout, stderr) => {
        rmSync(home, { recursive: true, force: true });
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, out: `${stdout}\n${stderr}` });
      },
    );
  });
}
