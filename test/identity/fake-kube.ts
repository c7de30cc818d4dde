/**
 * A loopback stand-in for the Kubernetes API server's TokenReview endpoint, and a kubeconfig
 * pointing at it: the gateway reaches it through @kubernetes/client-node exactly as it would
 * reach a cluster. The answer depends on the token's (unverified) payload:
 *
 * - `fake: 'pod'`   authenticated, `system:serviceaccount:<ns>:<sa>`, pod name and uid in extra
 * - `fake: 'sa'`    authenticated, no pod in extra
 * - `fake: 'aud'`   authenticated, but for another audience
 * - `fake: 'user'`  authenticated, but not a service account (`alice@example.com`)
 * - `fake: 'no'`    authenticated: false
 * - `fake: '500'`   HTTP 500
 * - `fake: '403'`   HTTP 403, as when the gateway may not create TokenReviews
 * An `exp` in the past is answered authenticated: false, as a real API server would.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { writeKubeconfig } from '../setup/kubeconfig.js';

export const GATEWAY_SA_TOKEN = 'gateway-sa-token-for-the-fake';

export interface TokenClaims {
  fake: 'pod' | 'sa' | 'aud' | 'user' | 'no' | '500' | '403';
  ns?: string;
  sa?: string;
  exp?: number;
  jti?: string;
  [k: string]: unknown;
}

/** A token shaped like a service-account JWT (three base64url parts); the signature is junk. */
export function jwt(claims: TokenClaims): string {
  const b = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b({ alg: 'RS256', kid: 'fake' })}.${b({ iss: 'https://kubernetes.default.svc', ...claims })}.${Buffer.from('not-a-signature').toString('base64url')}`;
}

export interface FakeKube {
  port: number;
  kubeconfig: string;
  /** TokenReviews received. */
  reviews: number;
  /** The most reviews that were being answered at once. */
  maxConcurrent: number;
  /** Each review's `spec.audiences`. */
  audiences: string[][];
  /** Authorization headers the gateway sent (its own credential, never the reviewed token). */
  authHeaders: Set<string>;
  /** Answer each review after this many milliseconds. */
  delayMs: number;
  /** Client connections currently open. */
  openConnections(): number;
  reset(): void;
  /** Stops listening and drops open connections: the API server is down. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

function answer(body: any): { status: number; json: unknown } {
  const token = String(body?.spec?.token ?? '');
  const requested: string[] = Array.isArray(body?.spec?.audiences) ? body.spec.audiences : [];
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'));
  } catch {
    claims = { fake: 'no' };
  }
  const review = (status: object) => ({
    status: 201,
    json: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', metadata: {}, spec: body.spec, status },
  });
  if (claims.fake === '403') {
    return { status: 403, json: { kind: 'Status', status: 'Failure', code: 403, reason: 'Forbidden', message: 'tokenreviews.authentication.k8s.io is forbidden' } };
  }
  if (claims.fake === '500') return { status: 500, json: { kind: 'Status', status: 'Failure', code: 500, message: 'etcd fell over' } };
  if (claims.fake === 'no' || (typeof claims.exp === 'number' && claims.exp * 1000 <= Date.now())) {
    return review({ authenticated: false, error: 'token is invalid or expired' });
  }
  const ns = claims.ns ?? 'default';
  const sa = claims.sa ?? 'default';
  const username = claims.fake === 'user' ? 'alice@example.com' : `system:serviceaccount:${ns}:${sa}`;
  const extra =
    claims.fake === 'pod'
      ? {
          'authentication.kubernetes.io/pod-name': [`${sa}-7d9f-abcde`],
          'authentication.kubernetes.io/pod-uid': ['3b5d6c1e-0000-4000-8000-000000000001'],
          'authentication.kubernetes.io/credential-id': ['JTI=x'],
        }
      : claims.fake === 'sa'
        ? { 'authentication.kubernetes.io/credential-id': ['JTI=y'] }
        : undefined;
  return review({
    authenticated: true,
    audiences: claims.fake === 'aud' ? ['https://kubernetes.default.svc'] : requested,
    user: { username, uid: 'u-1', groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`], ...(extra ? { extra } : {}) },
  });
}

export async function startFakeKube(): Promise<FakeKube> {
  let concurrent = 0;
  const sockets = new Set<import('node:net').Socket>();
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/apis/authentication.k8s.io/v1/tokenreviews') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","code":404}');
      return;
    }
    fake.authHeaders.add(String(req.headers.authorization));
    fake.reviews++;
    concurrent++;
    fake.maxConcurrent = Math.max(fake.maxConcurrent, concurrent);
    // Answered or abandoned by the client: either way no longer in flight.
    res.once('close', () => concurrent--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      fake.audiences.push(body?.spec?.audiences);
      setTimeout(() => {
        if (res.destroyed) return;
        const a = answer(body);
        res.writeHead(a.status, { 'content-type': 'application/json' }).end(JSON.stringify(a.json));
      }, fake.delayMs);
    });
  };
  let server: Server;
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server = createServer(handler);
      server.on('connection', (s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  await listen(0);
  const port = (server!.address() as AddressInfo).port;
  const { kubeconfig, dir } = writeKubeconfig(port, 'kslate-gateway', GATEWAY_SA_TOKEN);
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  const fake: FakeKube = {
    port,
    kubeconfig,
    reviews: 0,
    maxConcurrent: 0,
    audiences: [],
    authHeaders: new Set(),
    delayMs: 0,
    openConnections: () => sockets.size,
    reset() {
      fake.reviews = 0;
      fake.maxConcurrent = 0;
      fake.audiences = [];
      fake.delayMs = 0;
    },
    stop,
    start: () => listen(port),
    async close() {
      if (server.listening) await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return fake;
}
