/**
 * When a bearer credential says it expires: the `exp` claim of a JWT (OIDC tokens and
 * Kubernetes service-account tokens), read without verifying anything. Used only for a
 * credential a provider has already accepted, to end a watch stream when it expires
 * (issue 31 item 10); an API key, or a JWT without `exp`, says nothing (null).
 *
 * Runtime-neutral: atob and TextDecoder exist on Node and Workers.
 */
const JWT = /^[A-Za-z0-9_-]+\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]*$/;

/** The `exp` of the token in `Authorization: Bearer <token>`, in milliseconds since the epoch, or null. */
export function credentialExpiry(authorization: string | undefined): number | null {
  const token = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
  const payload = token === undefined ? undefined : JWT.exec(token)?.[1];
  if (payload === undefined || payload.length > 16_384) return null;
  try {
    const b64 = payload.replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
    const exp = (JSON.parse(new TextDecoder().decode(bytes)) as { exp?: unknown } | null)?.exp;
    return typeof exp === 'number' && Number.isFinite(exp) && exp > 0 ? exp * 1000 : null;
  } catch {
    return null;
  }
}
