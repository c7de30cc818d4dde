/**
 * A loopback stand-in for an OIDC issuer: a discovery document and a JWKS whose keys can
 * change (keys from jose's generateKeyPair), counting JWKS fetches; and tokens signed with
 * those keys. The gateway reaches it over real HTTP, as it would a real issuer.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';

export const AUD = 'kslate';

/**
 * A fake issuer: discovery (with the endpoints an OAuth client needs to start a sign-in), a
 * JWKS whose keys can change, a count of JWKS fetches and the paths it was asked for.
 */
export async function fakeIssuer(port = 0) {
  const jwks: JWK[] = [];
  const requests: string[] = [];
  let fetches = 0;
  let up = true;
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (!up) {
      res.writeHead(503).end();
      return;
    }
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (req.url === '/.well-known/openid-configuration') {
      const doc = {
        issuer: base,
        jwks_uri: `${base}/jwks`,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
    } else if (req.url === '/jwks') {
      fetches++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: jwks }));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    jwks,
    requests,
    fetches: () => fetches,
    setUp: (v: boolean) => void (up = v),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export async function key(kid: string, alg = 'RS256') {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { privateKey, jwk, kid, alg };
}

export type Key = Awaited<ReturnType<typeof key>>;

export function token(k: Key, claims: { iss: string; aud?: string; sub?: string; exp?: number | string; extra?: Record<string, unknown> }) {
  const jwt = new SignJWT(claims.extra ?? {}).setProtectedHeader({ alg: k.alg, kid: k.kid }).setIssuer(claims.iss).setAudience(claims.aud ?? AUD);
  if (claims.sub !== undefined) jwt.setSubject(claims.sub);
  jwt.setExpirationTime(claims.exp ?? '5m');
  return jwt.sign(k.privateKey);
}

