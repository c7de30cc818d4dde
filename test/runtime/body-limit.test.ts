/**
 * Bodies over 4 MiB (issue 10): the client must read the 400 MALFORMED answer, not a broken
 * pipe or a reset, on HTTP/JSON and on MCP; memory stays bounded because the rest of the body
 * is read and discarded, never kept.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

const MIB = 1024 * 1024;

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident]);
});
afterAll(async () => {
  await t?.close();
});

let seq = 0;
const fresh = () => `big-${++seq}`;

/** A body of `size` bytes in 1 MiB chunks, as a stream: sent chunked, without Content-Length. */
function streamOf(size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  const chunk = new Uint8Array(MIB).fill(0x7a);
  return new ReadableStream({
    pull(c) {
      if (sent >= size) return c.close();
      const n = Math.min(MIB, size - sent);
      c.enqueue(n === MIB ? chunk : chunk.subarray(0, n));
      sent += n;
    },
  });
}

async function put(body: BodyInit, id = fresh()): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/v1/records/incident/${id}/fields/blob`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
    body,
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  return { status: res.status, body: await res.json() };
}

describe('HTTP bodies over 4 MiB', () => {
  test('12 sequential 50 MiB bodies with Content-Length all read 400 MALFORMED, none a broken pipe', async () => {
    const big = Buffer.alloc(50 * MIB, 0x7a);
    const outcomes: string[] = [];
    for (let i = 0; i < 12; i++) {
      try {
        const r = await put(big);
        outcomes.push(`${r.status} ${r.body?.error}`);
      } catch (e) {
        outcomes.push(`thrown: ${(e as Error).message} ${((e as Error).cause as Error | undefined)?.message ?? ''}`);
      }
    }
    expect(outcomes).toEqual(Array(12).fill('400 MALFORMED'));
  }, 120_000);

  test('a chunked 50 MiB body (no Content-Length) reads 400 MALFORMED', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await put(streamOf(50 * MIB));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ error: 'MALFORMED', field: 'blob' });
    }
  }, 60_000);

  test('a client that sends its whole 50 MiB request before reading (like Python requests) reads the 400', async () => {
    const { hostname, port } = new URL(t.url);
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i++) {
      outcomes.push(
        await new Promise<string>((resolve) => {
          const socket = connect({ host: hostname, port: Number(port) });
          const chunks: Buffer[] = [];
          let wrote = false;
          socket.on('error', (e) => resolve(`${wrote ? 'read' : 'write'} error ${(e as NodeJS.ErrnoException).code}`));
          socket.on('connect', () => {
            socket.pause();
            const head =
              `PUT /v1/records/incident/${fresh()}/fields/blob HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEYS.alice}\r\n` +
              `Content-Type: application/json\r\nContent-Length: ${50 * MIB}\r\n\r\n`;
            socket.write(head);
            socket.write(Buffer.alloc(50 * MIB, 0x7a), (err) => {
              if (err) return; // reported by 'error'
              wrote = true;
              socket.on('data', (c) => chunks.push(c));
              socket.on('end', () => {
                const text = Buffer.concat(chunks).toString();
                resolve(`${text.split('\r\n')[0]} ${JSON.parse(text.split('\r\n\r\n')[1]).error}`);
                socket.destroy();
              });
              socket.resume();
            });
          });
        }),
      );
    }
    expect(outcomes).toEqual(Array(4).fill('HTTP/1.1 400 Bad Request MALFORMED'));
  }, 60_000);

  test('the next request after an oversized body is answered as usual', async () => {
    const r = await put(Buffer.alloc(5 * MIB, 0x7a));
    expect(r.status).toBe(400);
    const ok = await put(JSON.stringify({ value: 'small', expected_version: 0 }));
    expect(ok.status).toBe(201);
  });
});

describe('MCP messages over 4 MiB', () => {
  const post = async (body: BodyInit) => {
    const res = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEYS.alice}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
      },
      body,
      ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
    } as RequestInit);
    return { status: res.status, body: await res.json() };
  };
  const call = (value: string) =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'svc_put', arguments: { record: `incident/${fresh()}`, field: 'blob', value, expected_version: 0 } },
    });

  test('a tools/call of 50 MiB is HTTP 400 with a JSON-RPC error carrying the MALFORMED body', async () => {
    for (const body of [call('z'.repeat(50 * MIB)), streamOf(50 * MIB)]) {
      const r = await post(body);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ jsonrpc: '2.0', error: { code: expect.any(Number), data: { error: 'MALFORMED' } } });
      expect(r.body.error.data.message).toMatch(/4 MiB/);
    }
  }, 60_000);

  test('a tools/call whose value is just under 4 MiB still reaches the handler', async () => {
    const r = await post(call('q'.repeat(4 * MIB - 200)));
    expect(r.status).toBe(200);
    expect(r.body.result.isError).toBeFalsy();
  });
});
