/**
 * A gRPC error carries the HTTP error body in its trailers (grpc-status-details-bin), and
 * HTTP/2 clients cap trailers (Node's default header list is 64 KiB; many clients allow
 * less). A body past the cap breaks the client's channel: the call never answers and later
 * calls on it hang. So a body larger than the budget keeps its keys but sends its largest
 * values as null, naming them in `omitted`, and its message says so; HTTP and MCP still
 * carry them whole. Only STALE (current_value, diff) and the like get near this.
 */

/** Bytes of the packed details (a google.protobuf.Struct) a gRPC error may carry. */
export const ERROR_DETAILS_BUDGET = 16 * 1024;

/** Keys that identify the answer and are always kept. */
const KEEP = new Set(['error', 'message', 'record', 'field', 'request_id']);

export function fitErrorBody(
  body: Record<string, unknown>,
  budget: number,
  pack: (b: Record<string, unknown>) => Buffer,
): { body: Record<string, unknown>; packed: Buffer } {
  let packed = pack(body);
  if (packed.length <= budget) return { body, packed };
  // Largest values first, until the rest fits.
  const sizes = Object.entries(body)
    .filter(([k, v]) => !KEEP.has(k) && v !== null)
    .map(([k, v]) => [k, JSON.stringify(v)?.length ?? 0] as const)
    .sort((a, b) => b[1] - a[1]);
  const out: Record<string, unknown> = { ...body };
  const omitted: string[] = [];
  for (const [k] of sizes) {
    out[k] = null;
    omitted.push(k);
    out.omitted = omitted;
    out.message = `${String(body.message ?? '')} (${omitted.join(', ')} left out of this gRPC error to fit its trailers; read them with Get, or over HTTP)`;
    packed = pack(out);
    if (packed.length <= budget) break;
  }
  return { body: out, packed };
}
