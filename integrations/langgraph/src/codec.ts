/**
 * What both classes share: record ids built from names of any length and content, and the
 * serializer's bytes as JSON. fetch-era APIs only (TextEncoder, btoa, Web Crypto).
 */
import { kslate, type KslateClient } from '@kslate/client';

export interface Connection {
  /** The gateway's base URL (with `token` or `getToken`), or give `client`. */
  url?: string;
  token?: string;
  getToken?: () => string | Promise<string>;
  /** An @kslate/client instance to use instead of url/token. */
  client?: KslateClient;
  /** The kslate class to write (default: the one the package ships). */
  className?: string;
  /**
   * Keeps this instance's threads or items apart from others' in the same class (like a
   * database schema); default "default".
   */
  prefix?: string;
}

export function connect(c: Connection): KslateClient {
  if (c.client) return c.client;
  if (!c.url) throw new TypeError('@kslate/langgraph: give url (with token or getToken) or client');
  return kslate({ url: c.url, token: c.token, getToken: c.getToken });
}

const enc = new TextEncoder();
const dec = new TextDecoder();

function base64url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * A record id for a tuple of names: `<kind>-<base64url of the JSON>`, or, when that would
 * pass the id limit, `<kind>-h<SHA-256 hex>` (ids stay unique and match the class idPattern).
 */
export async function recordId(kind: string, parts: (string | number)[]): Promise<string> {
  const json = enc.encode(JSON.stringify(parts));
  const b = base64url(json);
  if (b.length <= 200) return `${kind}-${b}`;
  const digest = new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', json));
  return `${kind}-h${Array.from(digest, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** A serializer's output as JSON: text when the type is json, base64 otherwise. */
export interface Blob {
  t: string;
  s?: string;
  b?: string;
}

export function toBlob([type, bytes]: [string, Uint8Array | string]): Blob {
  if (typeof bytes === 'string') return { t: type, s: bytes };
  return type === 'json' ? { t: type, s: dec.decode(bytes) } : { t: type, b: base64url(bytes) };
}

export function blobBytes(b: Blob): Uint8Array {
  if (b.s !== undefined) return enc.encode(b.s);
  const s = (b.b ?? '').replace(/-/g, '+').replace(/_/g, '/');
  return fromBase64(s + '='.repeat((4 - (s.length % 4)) % 4));
}
