/**
 * The Node adapter's client address for the HTTP app: the socket's remote address, from
 * @hono/node-server. Other runtimes pass their own (Workers: cf-connecting-ip).
 */
import { getConnInfo } from '@hono/node-server/conninfo';
import type { PeerAddress } from './env.js';

export const nodePeer: PeerAddress = (c) => {
  try {
    return getConnInfo(c).remote.address ?? '';
  } catch {
    return '';
  }
};
