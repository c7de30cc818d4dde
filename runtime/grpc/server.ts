/**
 * The gRPC transport (decisions §7): service svc.v1.SvcService from proto/svc/v1/svc.proto.
 * Like HTTP it only translates: metadata -> identity and scope, request message -> the
 * handler's input (bodies as raw JSON, so the handler parses them at its step of the
 * rejection order), `invoke` -> the HTTP-shaped outcome -> the response message, and a
 * SvcError -> a gRPC status carrying the HTTP error body in grpc-status-details-bin.
 *
 * What only gRPC can get wrong — a message that does not decode, a read request over 4 MiB,
 * a google.protobuf.Value with no JSON form, `declare_no_premises` together with `based_on`
 * — is MALFORMED right after authentication: there is no well-formed handler input to
 * carry it to a later step (docs/grpc.md).
 */
import { randomUUID } from 'node:crypto';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition, ServiceDefinition } from '@grpc/proto-loader';
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';
import { MAX_BODY_BYTES, type RawBody } from '../../handlers/body.js';
import type { WriteOptions } from '../../handlers/write-once.js';
import { ERROR_TABLE, SvcError } from '../../handlers/errors.js';
import { asSvcError, operations, type Operation } from '../../handlers/index.js';
import type { Outcome } from '../../handlers/pipeline.js';
import type { AppendInput } from '../../handlers/append.js';
import type { CheckpointLoadInput } from '../../handlers/checkpoint-load.js';
import type { CheckpointSaveInput } from '../../handlers/checkpoint-save.js';
import type { ClaimInput } from '../../handlers/claim.js';
import type { GetInput } from '../../handlers/get.js';
import type { HistoryInput } from '../../handlers/history.js';
import type { PutInput } from '../../handlers/put.js';
import type { QueryInput } from '../../handlers/query.js';
import type { TransactionInput } from '../../handlers/transaction.js';
import type { Services } from '../services.js';
import { authenticateRequest, clientAddress, runRequest } from '../request.js';
import { requestIdFrom } from '../http/env.js';
import { afterNextPoll, DRAIN_GRACE_MS, stopListening } from '../drain.js';
import { PerAddress, type ListenOptions } from '../http/listen.js';
import {
  appendResultMsg,
  checkpointLoadResultMsg,
  checkpointSaveResultMsg,
  claimResultMsg,
  transactResultMsg,
  historyResultMsg,
  jsonToStruct,
  NotJsonError,
  premiseFromMsg,
  queryResultMsg,
  recordMsg,
  structToJson,
  valueToJson,
  writeResultMsg,
} from './convert.js';
import type { Any } from './generated/google/protobuf/Any.js';
import type { Struct, Struct__Output } from './generated/google/protobuf/Struct.js';
import type { Status } from './generated/google/rpc/Status.js';
import type { AppendRequest__Output } from './generated/svc/v1/AppendRequest.js';
import type { CheckpointLoadRequest__Output } from './generated/svc/v1/CheckpointLoadRequest.js';
import type { CheckpointSaveRequest__Output } from './generated/svc/v1/CheckpointSaveRequest.js';
import type { ClaimRequest__Output } from './generated/svc/v1/ClaimRequest.js';
import type { GetRequest__Output } from './generated/svc/v1/GetRequest.js';
import type { HistoryRequest__Output } from './generated/svc/v1/HistoryRequest.js';
import type { Premise__Output } from './generated/svc/v1/Premise.js';
import type { PutRequest__Output } from './generated/svc/v1/PutRequest.js';
import type { QueryRequest__Output } from './generated/svc/v1/QueryRequest.js';
import type { TransactRequest__Output } from './generated/svc/v1/TransactRequest.js';
import type { TransactWrite__Output } from './generated/svc/v1/TransactWrite.js';
import { resetterOf, resetters, watchRpc } from './watch.js';
import { watchOperations } from '../../handlers/watch.js';
import { beginCall } from './call-log.js';
import { ERROR_DETAILS_BUDGET, fitErrorBody } from './error-body.js';
import { loadSvcProto, messageType } from './proto.js';
import { addReflection } from './reflection.js';

export const SERVICE_NAME = 'svc.v1.SvcService';
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
export const STRUCT_TYPE_URL = 'type.googleapis.com/google.protobuf.Struct';

/**
 * grpc-js's receive limit. It is set above the 4 MiB body limit so that the handlers see
 * messages between the two and answer MALFORMED at their step, as HTTP does (after the
 * authorization checks, with `record` and `field`). A larger message is refused by grpc-js
 * from its length prefix, before it is read, so memory stays bounded; that refusal is turned
 * into MALFORMED too by `refuseOversized` below (docs/grpc.md, Limits).
 */
export const MAX_RECEIVE_BYTES = MAX_BODY_BYTES + 1024 * 1024;

export interface GrpcServer {
  port: number;
  /** Health answers NOT_SERVING from now on (a shutdown's first step); close() does it too. */
  notServing(): void;
  /** Refuse new calls, let calls in flight finish for at most `graceMs` (default 5 s), then cut them. */
  close(graceMs?: number): Promise<void>;
}

/** What the per-method deserializer hands the handler: never throws, so grpc-js never answers INTERNAL. */
type Decoded<T> = { ok: true; msg: T; bytes: number } | { ok: false; bytes: number; problem: string };

type Call<T> = grpc.ServerUnaryCall<Decoded<T>, Buffer>;

/** protobuf's nesting limit is 100 messages; a JSON level is two (Value, then Struct or ListValue). */
const ENCODE_DEPTH_HINT =
  'a JSON value nested more than about 48 levels deep exceeds the protobuf nesting limit of 100 messages; read this record over HTTP';

export async function startGrpc(
  s: Services,
  opts: { host: string; port: number; tls?: { cert: Buffer; key: Buffer }; maxConns: number; headerTimeoutMs: number } & Pick<
    ListenOptions,
    'maxConnsPerAddress' | 'onRefuse'
  >,
): Promise<GrpcServer> {
  const definition = loadSvcProto();
  const service = definition[SERVICE_NAME] as ServiceDefinition;
  const structType = messageType<Struct, unknown>(definition, 'google.protobuf.Struct');
  const statusType = messageType<Status, unknown>(definition, 'google.rpc.Status');

  /** The wire error: code from ERROR_TABLE, details = message, the HTTP body in a Status. */
  const toGrpc = (err: SvcError, requestId: string): Partial<grpc.StatusObject> => {
    const code = ERROR_TABLE[err.code].grpc;
    let body = err.body();
    let packed: Buffer;
    try {
      ({ body, packed } = fitErrorBody(body, ERROR_DETAILS_BUDGET, (b) => structType.serialize(jsonToStruct(b))));
    } catch (e) {
      // A body protobuf cannot nest (a STALE current_value over ~48 levels deep): keep the
      // code, message and every flat key rather than lose the answer.
      s.log.warn('gRPC error body too deeply nested to encode; sending its flat keys', {
        request_id: requestId,
        error: (e as Error).message,
      });
      const flat = Object.fromEntries(Object.entries(body).filter(([, v]) => v === null || typeof v !== 'object'));
      packed = structType.serialize(jsonToStruct(flat));
    }
    const message = String(body.message ?? err.message);
    const detail: Any = { type_url: STRUCT_TYPE_URL, value: packed };
    const metadata = new grpc.Metadata();
    metadata.set(STATUS_DETAILS_KEY, statusType.serialize({ code, message, details: [detail] }));
    return { code, details: message, metadata };
  };

  /** gRPC's X-Kslate-Lsn and X-Kslate-Min-Lsn (docs/ha.md "Reads from standbys"). */
  const LSN_KEY = 'x-kslate-lsn';
  const MIN_LSN_KEY = 'x-kslate-min-lsn';

  type Codec = { build: (msg: any, oversized: boolean) => unknown; shape: (out: Outcome) => object };
  const codec = <T, I>(build: (msg: T, oversized: boolean) => I, shape: (out: Outcome) => object): Codec => ({ build, shape });

  /**
   * One RPC: authenticate, build the handler input, invoke, encode. The response is
   * serialized here (the method's serializer passes Buffers through) so that a failure to
   * encode is answered like any other fault instead of grpc-js's bare INTERNAL.
   */
  const rpc =
    <T, I>(
      method: MethodDefinition<object, object>,
      op: Operation,
      timed: boolean | undefined,
      build: (msg: T, oversized: boolean) => I,
      shape: (out: Outcome) => object,
    ) =>
    async (call: Call<T>, callback: grpc.sendUnaryData<Buffer>) => {
      const requestId = requestIdFrom(firstText(call.metadata, 'x-request-id'), randomUUID);
      const log = beginCall(s.log, method.path, call, requestId, false);
      const logged = log.logged;
      const r = await runRequest(
        s,
        {
          address: peerAddress(call, s.trustProxy),
          authorization: firstText(call.metadata, 'authorization'),
          scope: firstText(call.metadata, 'x-svc-scope'),
          requestId,
          ...(op.write ? { write: writeOptions(call) } : {}),
          minLsn: firstText(call.metadata, MIN_LSN_KEY),
          access: log,
        },
        op,
        () => {
          const req = call.request;
          if (!req.ok) throw new SvcError('MALFORMED', req.problem);
          return build(req.msg, req.bytes > MAX_BODY_BYTES);
        },
        timed === undefined ? {} : { timed },
      );
      // The WAL position the call's writes reached, in the trailing metadata (docs/ha.md).
      const trailer = new grpc.Metadata();
      if (r.lsn !== null) trailer.set(LSN_KEY, r.lsn);
      if (!r.ok) {
        const status = toGrpc(r.error, requestId);
        if (r.error.replayed) status.metadata?.set(REPLAYED_KEY, 'true');
        if (r.lsn !== null) status.metadata?.set(LSN_KEY, r.lsn);
        log.sendId();
        callback(status);
        logged(status.code ?? grpc.status.UNKNOWN);
        return;
      }
      const out = r.out;
      try {
        let bytes: Buffer;
        try {
          bytes = method.responseSerialize(shape(out));
        } catch (e) {
          const msg = (e as Error).message ?? String(e);
          if (/depth/i.test(msg)) {
            s.log.warn('gRPC response too deeply nested to encode', { request_id: requestId, rpc: op.name });
            throw new SvcError('INTERNAL', `The response cannot be encoded: ${ENCODE_DEPTH_HINT}. Request id ${requestId}.`, {
              request_id: requestId,
            });
          }
          throw e;
        }
        log.sendId(out.replayed ? { [REPLAYED_KEY]: 'true' } : undefined);
        callback(null, bytes, trailer);
        logged(grpc.status.OK);
      } catch (e) {
        const err = asSvcError(e, { log: s.log, requestId });
        const status = toGrpc(err, requestId);
        log.sendId();
        callback(status);
        logged(status.code ?? grpc.status.UNKNOWN, err.code);
      }
    };

  // Requests are decoded by a guard that reports a failure instead of throwing, and
  // responses arrive already serialized (see rpc).
  const methods = Object.fromEntries(
    Object.entries(service).map(([name, m]) => [
      name,
      {
        ...m,
        requestDeserialize: guardedDeserialize(m.requestType.type as { name?: string }, m.requestDeserialize),
        responseSerialize: (v: unknown) => (Buffer.isBuffer(v) ? v : m.responseSerialize(v as object)),
      },
    ]),
  ) as unknown as grpc.ServiceDefinition;

  const m = (name: string): MethodDefinition<object, object> => service[name];
  // How each operation's input is built from its request message and its outcome shaped
  // into the response message; which RPC carries which operation is declared once, on the
  // operation (handlers/index.ts `grpc`), and the method table is built from that.
  const codecs: Record<string, Codec> = {
    get: codec<GetRequest__Output, GetInput>(
      (msg, oversized) => {
        refuseOversizedRead(oversized);
        return {
          ...splitRecord(msg.record),
          ...(msg.fields.length > 0 ? { fields: msg.fields } : {}),
          ...(msg.entries_limit !== undefined ? { entries_limit: msg.entries_limit } : {}),
          ...(msg.entries_before !== undefined ? { entries_before: msg.entries_before } : {}),
        };
      },
      (out) => recordMsg(out.body),
    ),
    put: codec<PutRequest__Output, PutInput>(
      (msg, oversized) =>
        fieldWrite(msg, oversized, () => ({
          ...(msg.value !== null ? { value: valueToJson(msg.value!, 'value') } : {}),
          // proto3 cannot tell 0 from unset; 0 is also what "the field must not exist" says.
          expected_version: msg.expected_version,
          ...(msg.evidence !== undefined ? { evidence: msg.evidence } : {}),
          ...premises(msg.based_on, msg.declare_no_premises),
          ...(msg.ttl_seconds !== undefined ? { ttl_seconds: Number(msg.ttl_seconds) } : {}),
        })),
      writeResultMsg,
    ),
    append: codec<AppendRequest__Output, AppendInput>(
      (msg, oversized) =>
        fieldWrite(msg, oversized, () => ({
          ...(msg.entry !== null ? { entry: valueToJson(msg.entry!, 'entry') } : {}),
          // "" is unset in proto3; either way append answers EVIDENCE_REQUIRED at its step.
          ...(msg.evidence !== '' ? { evidence: msg.evidence } : {}),
          ...premises(msg.based_on, msg.declare_no_premises),
          ...(msg.ttl_seconds !== undefined ? { ttl_seconds: Number(msg.ttl_seconds) } : {}),
        })),
      appendResultMsg,
    ),
    claim: codec<ClaimRequest__Output, ClaimInput>(
      (msg, oversized) =>
        fieldWrite(msg, oversized, () => ({
          ...(msg.lease_seconds !== undefined ? { lease_seconds: msg.lease_seconds } : {}),
          // renew false and renew absent mean the same (an ordinary claim).
          ...(msg.renew ? { renew: true } : {}),
        })),
      claimResultMsg,
    ),
    transaction: codec<TransactRequest__Output, TransactionInput>(
      (msg, oversized) => ({
        ...splitRecord(msg.record),
        body: oversized
          ? tooLarge()
          : jsonBody(() => ({
              writes: msg.writes.map(transactWrite),
              ...premises(msg.based_on, msg.declare_no_premises),
              ...(msg.evidence !== undefined ? { evidence: msg.evidence } : {}),
              ...(msg.invocation !== null ? { invocation: structToJson(msg.invocation!, 'invocation') } : {}),
              ...(msg.ttl_seconds !== undefined ? { ttl_seconds: Number(msg.ttl_seconds) } : {}),
            })),
      }),
      transactResultMsg,
    ),
    checkpointSave: codec<CheckpointSaveRequest__Output, CheckpointSaveInput>(
      (msg, oversized) => ({
        ...splitRecord(msg.record),
        body: oversized
          ? tooLarge()
          : jsonBody(() => (msg.document !== null ? { document: structToJson(msg.document!, 'document') } : {})),
      }),
      checkpointSaveResultMsg,
    ),
    checkpointLoad: codec<CheckpointLoadRequest__Output, CheckpointLoadInput>(
      (msg, oversized) => {
        refuseOversizedRead(oversized);
        return { ...splitRecord(msg.record), ...(msg.role !== undefined ? { role: msg.role } : {}) };
      },
      checkpointLoadResultMsg,
    ),
    query: codec<QueryRequest__Output, QueryInput>(
      (msg, oversized) => {
        refuseOversizedRead(oversized);
        return {
          class: msg.class,
          filters: Object.fromEntries(Object.entries(msg.filters)),
          // 0 and "" are unset in proto3: the default page size, the first page.
          ...(msg.limit !== 0 ? { limit: msg.limit } : {}),
          ...(msg.after !== '' ? { after: msg.after } : {}),
        };
      },
      queryResultMsg,
    ),
    history: codec<HistoryRequest__Output, HistoryInput>(
      (msg, oversized) => {
        refuseOversizedRead(oversized);
        return {
          ...splitRecord(msg.record),
          ...(msg.field !== undefined ? { field: msg.field } : {}),
          // 0 and "" are unset in proto3: the default page size, the newest page.
          ...(msg.limit !== 0 ? { limit: msg.limit } : {}),
          ...(msg.before !== '' ? { before: msg.before } : {}),
        };
      },
      historyResultMsg,
    ),
  };
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const op of Object.values(operations) as Operation[]) {
    if (!op.grpc) continue;
    const c = codecs[op.name];
    if (!c || !service[op.grpc]) throw new Error(`operation ${op.name} declares RPC ${op.grpc}, which has no codec or is not in ${SERVICE_NAME}`);
    implementation[op.grpc] = rpc(m(op.grpc), op, op.write ? true : undefined, c.build, c.shape);
  }
  // The watch operations (handlers/watch.ts) answer streams: both declare the one
  // server-streaming RPC `Watch`, whose request picks which of them runs.
  for (const op of Object.values(watchOperations) as Operation[]) {
    if (!op.grpc) continue;
    if (!service[op.grpc]?.responseStream) throw new Error(`watch operation ${op.name} declares RPC ${op.grpc}, which is not a server-streaming RPC of ${SERVICE_NAME}`);
    implementation[op.grpc] ??= watchRpc({
      s,
      method: m(op.grpc),
      toGrpc,
      meta: (call) => ({
        address: peerAddress(call, s.trustProxy),
        authorization: firstText(call.metadata, 'authorization'),
        scope: firstText(call.metadata, 'x-svc-scope'),
        requestId: requestIdFrom(firstText(call.metadata, 'x-request-id'), randomUUID),
      }),
    });
  }
  const unserved = Object.keys(service).filter((name) => !implementation[name]);
  if (unserved.length > 0) throw new Error(`RPCs of ${SERVICE_NAME} that no operation declares: ${unserved.join(', ')}`);

  /**
   * grpc-js answers a message over MAX_RECEIVE_BYTES itself, with RESOURCE_EXHAUSTED and no
   * body, from its base call (server-interceptors.js, handleDataFrame: the StreamDecoder
   * throws on the length prefix), below every interceptor. The spec keeps RESOURCE_EXHAUSTED
   * for rate limiting, so this first interceptor, which is handed that base call, replaces
   * its sendStatus: such a status becomes the MALFORMED answer (INVALID_ARGUMENT with the
   * body in grpc-status-details-bin), after the credential check, which comes first on every
   * transport. Every other status passes through unchanged.
   */
  const refuseOversized: grpc.ServerInterceptor = (_method, call) => {
    let metadata = new grpc.Metadata();
    let refused = false;
    const base = call as unknown as { sendStatus(status: Partial<grpc.StatusObject>): void };
    const send = base.sendStatus.bind(call);
    base.sendStatus = (status) => {
      if (status.code !== grpc.status.RESOURCE_EXHAUSTED || !/^Received message (larger than max|that decompresses to a size larger than)/.test(status.details ?? '')) {
        send(status);
        return;
      }
      // The decoder throws again on every further frame until the status is out.
      if (refused) return;
      refused = true;
      const requestId = randomUUID();
      authenticateRequest(s, peerAddress({ getPeer: () => call.getPeer(), metadata }, s.trustProxy), firstText(metadata, 'authorization'))
        .then(() => {
          throw new SvcError('MALFORMED', `The request message is larger than ${MAX_BODY_BYTES} bytes (4 MiB); send a smaller one.`);
        })
        .catch((e: unknown) => send(toGrpc(asSvcError(e, { log: s.log, requestId }), requestId) as Partial<grpc.StatusObject>));
    };
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (md, nextMd) => {
            metadata = md;
            // A Watch call whose client stopped reading can only be ended by a reset (watch.ts).
            resetters.set(md, resetterOf(call));
            nextMd(md);
          },
        }),
    });
  };

  const server = new grpc.Server({
    interceptors: [refuseOversized],
    'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
    // Responses may carry records up to the database's limits; clients set their own cap.
    'grpc.max_send_message_length': -1,
    // channelz (grpc-js's call and socket counters, for its admin service) is on by default and
    // counts every call; kslate serves no channelz and reports calls in its own metrics.
    'grpc.enable_channelz': 0,
    ...CONNECTION_OPTIONS,
  });
  server.addService(methods, implementation);
  const health = addHealth(server, s);
  addReflection(server);
  const creds = opts.tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: opts.tls.cert, private_key: opts.tls.key }], false)
    : grpc.ServerCredentials.createInsecure();
  const listener = await listenGrpc(server, creds, opts);
  return {
    port: listener.port,
    notServing: health.notServing,
    close: (graceMs = 5_000) =>
      new Promise<void>((resolve) => {
        health.notServing();
        // Let calls in flight finish, but do not wait on them past the grace period.
        const timer = setTimeout(() => {
          listener.abandon();
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        // Calls already sent are answered (runtime/drain.ts): the port stops listening once the
        // kernel's accept queue is taken, connections still sending their preface are handed
        // to grpc-js, and grpc-js's GOAWAY comes only after the sessions have read what their
        // clients sent, so it names every call received (later ones are refused and retried
        // by the client). tryShutdown then waits for those calls.
        void listener
          .close(Math.min(DRAIN_GRACE_MS, graceMs), graceMs / 2)
          .then(afterNextPoll)
          .then(() =>
            server.tryShutdown(() => {
              clearTimeout(timer);
              resolve();
            }),
          );
      }),
  };
}

/**
 * How long gRPC connections may live (docs/grpc.md, "Connections"). grpc-js's server reads
 * these; it has no server-side `grpc.http2.max_pings_without_data` (Node's HTTP/2 bounds
 * unanswered pings itself).
 */
export const CONNECTION_OPTIONS = {
  /** Ping an idle client this often, and drop it if the ping is not answered in time. */
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  /** Close a connection that has had no call for this long (the client reconnects when it needs to). */
  'grpc.max_connection_idle_ms': 5 * 60_000,
  /** Ask a client to reconnect after this long (spreads load over replicas), calls in flight get the grace. */
  'grpc.max_connection_age_ms': 30 * 60_000,
  'grpc.max_connection_age_grace_ms': 60_000,
  /** Calls at once on one connection. */
  'grpc.max_concurrent_streams': 100,
} as const;

/** How often Watch clients of the health service get a fresh answer from the database. */
const HEALTH_REFRESH_MS = 10_000;

/**
 * grpc.health.v1.Health (grpc-health-check) for "" (the server) and svc.v1.SvcService:
 * SERVING when readiness says the database and schema are there, NOT_SERVING otherwise and
 * from the start of a shutdown. Check asks readiness each time; Watch streams are updated
 * every HEALTH_REFRESH_MS. No credential: the status reveals nothing private.
 */
function addHealth(server: grpc.Server, s: Services): { notServing(): void } {
  const names = ['', SERVICE_NAME];
  const impl = new HealthImplementation(Object.fromEntries(names.map((n) => [n, 'NOT_SERVING' as ServingStatus])));
  let current: ServingStatus = 'NOT_SERVING';
  let stopped = false;
  const set = (status: ServingStatus) => {
    if (status === current) return;
    current = status;
    for (const n of names) impl.setStatus(n, status);
  };
  const refresh = async () => {
    const r = await s.readiness.check();
    if (!stopped) set(r.ready ? 'SERVING' : 'NOT_SERVING');
  };
  const timer = setInterval(() => void refresh(), HEALTH_REFRESH_MS);
  timer.unref();
  // Check refreshes first; the package's handlers do the rest (NOT_FOUND for other names, Watch).
  impl.addToServer({
    addService: (definition, handlers) =>
      server.addService(definition as grpc.ServiceDefinition, {
        ...handlers,
        check: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
          void refresh().finally(() => (handlers.check as grpc.handleUnaryCall<unknown, unknown>)(call, callback)),
      } as grpc.UntypedServiceImplementation),
  });
  void refresh();
  return {
    notServing() {
      stopped = true;
      clearInterval(timer);
      set('NOT_SERVING');
    },
  };
}

/** What a plain-text HTTP/2 client sends first. */
const HTTP2_PREFACE_BYTES = 24;

/**
 * The gRPC port is our own TCP server that hands each connection to grpc-js
 * (`createConnectionInjector`) only once it has sent its first bytes: the HTTP/2 preface
 * (plain text) or the start of the TLS handshake. grpc-js's own listener would create an
 * HTTP/2 session at once, and a connection that never sends anything would stay open as long
 * as the session's idle limit. Here it is closed after --header-timeout, and connections over
 * --max-conns are reset (HTTP/2 has no answer to give before the preface).
 */
async function listenGrpc(
  server: grpc.Server,
  creds: grpc.ServerCredentials,
  opts: { host: string; port: number; tls?: unknown; maxConns: number; headerTimeoutMs: number } & Pick<ListenOptions, 'maxConnsPerAddress' | 'onRefuse'>,
): Promise<{ port: number; close(silentMs: number, budgetMs: number): Promise<void>; abandon(): void }> {
  const injector = server.createConnectionInjector(creds);
  const perAddress = new PerAddress(opts.maxConnsPerAddress ?? 0);
  const need = opts.tls ? 1 : HTTP2_PREFACE_BYTES;
  let open = 0;
  /** Connections still sending their first bytes: grpc-js does not know them yet. */
  const waiting = new Set<Socket>();
  /** Called whenever a connection leaves `waiting` (close() waits for it to empty). */
  let left = () => undefined as void;
  const tcp = createTcpServer((socket) => {
    // Errors before grpc-js owns the socket (a reset during the preface) are just a close.
    socket.on('error', () => undefined);
    if (open >= opts.maxConns || !perAddress.take(socket)) {
      opts.onRefuse?.(open >= opts.maxConns ? 'conns' : 'conns_per_address');
      socket.destroy();
      return;
    }
    open++;
    socket.once('close', () => open--);
    // Checked once more after a poll: a preface that arrived while a busy event loop held
    // this timer back is still taken (as runtime/http/listen.ts does for HTTP).
    const timer = setTimeout(
      () =>
        void afterNextPoll().then(() => {
          if (waiting.has(socket)) socket.destroy();
        }),
      opts.headerTimeoutMs,
    );
    timer.unref();
    waiting.add(socket);
    socket.once('close', () => {
      clearTimeout(timer);
      if (waiting.delete(socket)) left();
    });
    const chunks: Buffer[] = [];
    let got = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (got < need) return;
      clearTimeout(timer);
      waiting.delete(socket);
      socket.off('data', onData);
      socket.pause();
      // Node's HTTP/2 and TLS read what is already buffered on the socket before its handle.
      socket.unshift(Buffer.concat(chunks));
      injector.injectConnection(socket);
      left();
    };
    socket.on('data', onData);
  });
  const host = opts.host;
  const port = await new Promise<number>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen(opts.port, host, () => {
      tcp.off('error', reject);
      resolve((tcp.address() as AddressInfo).port);
    });
  });
  return {
    port,
    /**
     * Stop listening once the accept queue is taken (within `budgetMs`); resolves when every
     * connection still sending its preface has been handed to grpc-js or closed: one that has
     * sent nothing after `silentMs` is closed, one that has sent part of it keeps --header-timeout.
     */
    close: async (silentMs: number, budgetMs: number) => {
      await stopListening(tcp, budgetMs);
      if (waiting.size === 0) return;
      await new Promise<void>((resolve) => {
        const silent = setTimeout(
          () =>
            void afterNextPoll().then(() => {
              for (const socket of waiting) if (socket.bytesRead === 0) socket.destroy();
            }),
          silentMs,
        );
        left = () => {
          if (waiting.size > 0) return;
          clearTimeout(silent);
          resolve();
        };
      });
    },
    /** Close every connection still sending its preface (the stop's budget is spent). */
    abandon: () => {
      tcp.close();
      for (const socket of waiting) socket.destroy();
    },
  };
}

// ---- translation helpers ----------------------------------------------------------------

/** Response metadata of an answer replayed from its idempotency key (issue 33): initial metadata on success, trailers on a rejection. */
export const REPLAYED_KEY = 'idempotent-replayed';

/** A write's idempotency key (metadata `idempotency-key`) and its message's `dry_run`. */
function writeOptions(call: { metadata: grpc.Metadata; request: Decoded<unknown> }): WriteOptions {
  const key = firstText(call.metadata, 'idempotency-key');
  const dry = call.request.ok && (call.request.msg as { dry_run?: boolean }).dry_run === true;
  return { ...(key !== undefined ? { idempotencyKey: key } : {}), ...(dry ? { dryRun: true } : {}) };
}

/** `<class>/<id>` split at the first '/'; a missing id is left empty for the handler to refuse. */
export function splitRecord(record: string): { class: string; id: string } {
  const i = record.indexOf('/');
  return i < 0 ? { class: record, id: '' } : { class: record.slice(0, i), id: record.slice(i + 1) };
}

/** One write of a Transact request as the JSON write of an HTTP transaction: only the keys the message sets. */
function transactWrite(w: TransactWrite__Output, i: number): Record<string, unknown> {
  return {
    op: w.op,
    field: w.field,
    ...(w.value !== null ? { value: valueToJson(w.value!, `writes[${i}].value`) } : {}),
    ...(w.expected_version !== undefined ? { expected_version: w.expected_version } : {}),
    ...(w.entry !== null ? { entry: valueToJson(w.entry!, `writes[${i}].entry`) } : {}),
    ...(w.evidence !== undefined ? { evidence: w.evidence } : {}),
    ...premises(w.based_on, w.declare_no_premises),
    ...(w.invocation !== null ? { invocation: structToJson(w.invocation!, `writes[${i}].invocation`) } : {}),
    ...(w.lease_seconds !== undefined ? { lease_seconds: w.lease_seconds } : {}),
    ...(w.renew ? { renew: true } : {}),
    ...(w.ttl_seconds !== undefined ? { ttl_seconds: Number(w.ttl_seconds) } : {}),
  };
}

const tooLarge = (): RawBody => ({ kind: 'too-large', limit: MAX_BODY_BYTES });

/**
 * `based_on` and `declare_no_premises` as the handler's body takes them: the handler refuses
 * both together (MALFORMED at its body step) and treats `declare_no_premises` as `based_on: []`.
 */
export function premises(list: Premise__Output[], declareNone: boolean): { based_on?: unknown[]; declare_no_premises?: true } {
  return {
    ...(list.length > 0 ? { based_on: list.map(premiseFromMsg) } : {}),
    ...(declareNone ? { declare_no_premises: true as const } : {}),
  };
}

/**
 * A body built from the message; a Value or Struct with no JSON form makes it `invalid`, which
 * the handler answers MALFORMED at its body step, as HTTP does for bad JSON.
 */
/**
 * The input of a write to one field (put, append, claim): the record and field it addresses,
 * and its JSON body (the message's own parts, then the invocation every write may carry).
 */
function fieldWrite(
  msg: { record: string; field: string; invocation: Struct__Output | null },
  oversized: boolean,
  parts: () => Record<string, unknown>,
): { class: string; id: string; field: string; body: RawBody } {
  return {
    ...splitRecord(msg.record),
    field: msg.field,
    body: oversized
      ? tooLarge()
      : jsonBody(() => ({ ...parts(), ...(msg.invocation !== null ? { invocation: structToJson(msg.invocation!, 'invocation') } : {}) })),
  };
}

function jsonBody(build: () => Record<string, unknown>): RawBody {
  try {
    return { kind: 'json', value: build() };
  } catch (e) {
    if (e instanceof NotJsonError) return { kind: 'invalid', reason: `Invalid request message: ${e.message}.` };
    throw e;
  }
}

/** Read RPCs have no body on HTTP; a request message over the body limit is refused outright. */
function refuseOversizedRead(oversized: boolean): void {
  if (oversized) {
    throw new SvcError('MALFORMED', `The request message is larger than ${MAX_BODY_BYTES} bytes (4 MiB); send a smaller one.`);
  }
}

function guardedDeserialize<T>(type: { name?: string }, deserialize: (b: Buffer) => T): (b: Buffer) => Decoded<T> {
  const name = `svc.v1.${type.name ?? 'request'}`;
  return (buf) => {
    try {
      return { ok: true, msg: deserialize(buf), bytes: buf.length };
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      const problem =
        buf.length > MAX_BODY_BYTES
          ? `The request message is larger than ${MAX_BODY_BYTES} bytes (4 MiB) and does not decode as ${name}; send a smaller one.`
          : `The request message does not decode as ${name} (${why}); check that the client uses proto/svc/v1/svc.proto.`;
      return { ok: false, bytes: buf.length, problem };
    }
  };
}

function firstText(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === 'string' ? v : undefined;
}

/**
 * The client address for the rejected-credential budget, shared with HTTP: the peer's
 * address without its port, or with --trust-proxy N the address N hops back in
 * x-forwarded-for, as on HTTP.
 */
export function peerAddress(call: { getPeer(): string; metadata: grpc.Metadata }, trustProxy: number): string {
  return clientAddress(hostOf(call.getPeer()), firstText(call.metadata, 'x-forwarded-for'), trustProxy);
}

/** grpc-js peers are `<address>:<port>` (IPv6 unbracketed) or `unknown`. */
function hostOf(peer: string): string {
  const i = peer.lastIndexOf(':');
  if (i <= 0 || !/^\d+$/.test(peer.slice(i + 1))) return peer;
  return peer.slice(0, i).replace(/^\[(.*)\]$/, '$1');
}
