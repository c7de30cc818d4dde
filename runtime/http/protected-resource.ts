/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) and the challenge of every 401 (RFC 6750
 * §3): how a client learns to authenticate. With an identity provider that names an
 * authorization server (`--identity oidc`: the issuer), the metadata names it, so an MCP
 * client that implements the MCP authorization spec can sign the user in there and come back
 * with a token of that issuer. Without one (API keys, service-account tokens) the metadata
 * routes answer 404 saying which credential to send, and no 401 points at them.
 */
import type { Context, Hono } from 'hono';
import * as v from 'valibot';
import { SvcError } from '../../handlers/errors.js';
import { MCP_PATH, MCP_SESSION_PATH } from './mcp/server.js';
import { trustedHop, type AppServices } from '../request.js';
import type { AppEnv, RequestView } from './env.js';

/** RFC 9728 §3: the well-known path, then the resource's own path (none for the whole API). */
export const PRM_PATH = '/.well-known/oauth-protected-resource';
/** The resources with metadata of their own: the API (the origin) and its MCP endpoints. */
export const PRM_RESOURCES = ['', MCP_PATH, MCP_SESSION_PATH] as const;

const d = v.description;

export const protectedResourceBody = v.strictObject({
  resource: v.pipe(v.string(), d("The resource this document describes: the gateway's origin, or the origin and the MCP path.")),
  authorization_servers: v.pipe(v.array(v.string()), d('The issuer of --oidc-issuer: where a client gets a token for this gateway.')),
  bearer_methods_supported: v.pipe(v.array(v.literal('header')), d('Tokens go in the Authorization header only.')),
  resource_name: v.literal('kslate'),
});

/** The authorization servers of the configured identity providers (none without oidc). */
function authorizationServers(s: AppServices): string[] {
  return (s.providers ?? []).flatMap((p) => (p.authorizationServer ? [p.authorizationServer] : []));
}

/**
 * The origin clients reach the gateway at: the request's own, or behind `--trust-proxy`
 * proxies what X-Forwarded-Proto and X-Forwarded-Host say (a TLS-terminating proxy in front
 * of a plain-HTTP gateway).
 */
export function publicOrigin(req: RequestView, s: Pick<AppServices, 'trustProxy'>): string {
  const url = new URL(req.url);
  const proto = trustedHop(req.header('x-forwarded-proto'), s.trustProxy);
  const host = trustedHop(req.header('x-forwarded-host'), s.trustProxy);
  if (!proto && !host) return url.origin;
  const scheme = proto === 'https' || proto === 'http' ? proto : url.protocol.slice(0, -1);
  try {
    return new URL(`${scheme}://${host ?? url.host}`).origin;
  } catch {
    return url.origin; // a forwarded host that is no host
  }
}

/** The metadata URL of the resource `path` belongs to: an MCP endpoint's own, else the API's. */
function metadataPath(path: string): string {
  const mcp = PRM_RESOURCES.filter((r) => r !== '' && (path === r || path.startsWith(`${r}/`))).sort((a, b) => b.length - a.length)[0];
  return PRM_PATH + (mcp ?? '');
}

// RFC 6750 §3: auth-param values are quoted strings; a URL with a quote or backslash (from a
// strange Host header) is left out rather than escaped.
const QUOTABLE = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * The WWW-Authenticate of a 401 (RFC 6750 §3): the Bearer scheme and realm, `invalid_token`
 * when a bearer token was sent (none when the request carried no token, as §3.1 asks), and
 * with an authorization server the metadata URL (RFC 9728 §5.1), as the MCP authorization
 * spec expects.
 */
export function wwwAuthenticate(req: RequestView, s: AppServices): string {
  const params = ['realm="kslate"'];
  if (/^\s*bearer\s+\S/i.test(req.header('authorization') ?? '')) params.push('error="invalid_token"');
  if (authorizationServers(s).length > 0) {
    const url = publicOrigin(req, s) + metadataPath(req.path);
    if (QUOTABLE.test(url)) params.push(`resource_metadata="${url}"`);
  }
  return `Bearer ${params.join(', ')}`;
}

/** GET /.well-known/oauth-protected-resource[/mcp[/session]]: no credential, the same for every caller. */
export function mountProtectedResource(app: Hono<AppEnv>, s: AppServices): void {
  for (const resource of PRM_RESOURCES) {
    app.get(PRM_PATH + resource, (c) => {
      const servers = authorizationServers(s);
      if (servers.length === 0) {
        const kinds = (s.providers ?? []).map((p) => p.kind).join(',');
        const err = new SvcError(
          'NOT_FOUND',
          `This gateway has no OAuth authorization server (--identity ${kinds} has no oidc): send "Authorization: Bearer <token>" with a credential of --identity; see docs/identity.md.`,
        );
        c.get('access').error = err.code;
        return c.json(err.body(), 404);
      }
      const body: v.InferOutput<typeof protectedResourceBody> = {
        resource: publicOrigin(c.req, s) + resource,
        authorization_servers: servers,
        bearer_methods_supported: ['header'],
        resource_name: 'kslate',
      };
      return c.json(body, 200);
    });
  }
}
