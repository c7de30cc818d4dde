/**
 * Cursors (decisions §4): `<payload>.<HMAC-SHA-256>`, both base64url. The HMAC is computed in
 * plain JavaScript (@noble/hashes); these tests hold it to Web Crypto's, so cursors issued
 * before the change (and by any replica) still verify, and to the refusals.
 */
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { decodeCursor, encodeCursor, type CursorPayload } from '../../handlers/cursor.js';
import { SvcError } from '../../handlers/errors.js';

const enc = new TextEncoder();
const b64url = (b: Uint8Array) => Buffer.from(b).toString('base64url');

/** The cursor as Web Crypto signs it: what every gateway issued before @noble/hashes. */
async function webCryptoCursor(secret: string, payload: CursorPayload): Promise<string> {
  const key = await crypto.subtle.importKey('raw', enc.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const body = enc.encode(JSON.stringify(payload));
  return `${b64url(body)}.${b64url(new Uint8Array(await crypto.subtle.sign('HMAC', key, body)))}`;
}

const payload = fc.record({
  t: fc.constantFrom('before' as const, 'after' as const, 'entries' as const),
  b: fc.string({ maxLength: 300 }),
  p: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
});

describe('cursor signatures', () => {
  test('equal to Web Crypto HMAC-SHA-256 for any key and payload, and each verifies', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 100 }), payload, async (secret, p) => {
        const ours = await encodeCursor(secret, p);
        expect(ours).toBe(await webCryptoCursor(secret, p));
        expect(await decodeCursor(secret, ours, { t: p.t, b: p.b }, {})).toBe(p.p);
      }),
      { numRuns: 200 },
    );
  });

  test('another key, a changed payload, a flipped signature bit or a cut signature: MALFORMED', async () => {
    const p: CursorPayload = { t: 'before', b: 'incident/a#', p: 42 };
    const good = await encodeCursor('key-1', p);
    const [body, sig] = good.split('.');
    const bytes = Buffer.from(sig, 'base64url');
    const flipped = Buffer.from(bytes);
    flipped[31] ^= 1;
    const otherBody = b64url(enc.encode(JSON.stringify({ ...p, p: 43 })));
    const refused = [
      await encodeCursor('key-2', p),
      `${otherBody}.${sig}`,
      `${body}.${b64url(flipped)}`,
      `${body}.${b64url(bytes.subarray(0, 31))}`,
      `${body}.`,
    ];
    for (const c of refused) {
      const e = await decodeCursor('key-1', c, { t: 'before', b: 'incident/a#' }, {}).catch((x: unknown) => x);
      expect(e, c).toBeInstanceOf(SvcError);
      expect((e as SvcError).code).toBe('MALFORMED');
    }
    expect(await decodeCursor('key-1', good, { t: 'before', b: 'incident/a#' }, {})).toBe(42);
  });
});
