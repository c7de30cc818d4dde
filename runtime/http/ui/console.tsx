/**
 * The web console at /ui (docs/console.md): server-rendered, read-only pages over the same
 * operation table every transport mounts. The person's credential is kept in a server-side
 * session (session.ts) named by an opaque HttpOnly, SameSite=Strict cookie; each page
 * authenticates the session's credential exactly as an API request (`runRequest`:
 * rejected-credential budget, providers) and calls the handlers with that identity, so read
 * scopes, SCOPE_DENIED and NO_ROLE hold as on every transport. No rule lives here; this file
 * only translates requests into handler inputs and outcomes into pages.
 */
import type { Context, Hono } from 'hono';
import type { JSX } from 'hono/jsx/jsx-runtime';
import { subjectMatches } from '../../../handlers/class-registry.js';
import { SvcError } from '../../../handlers/errors.js';
import { asSvcError, operations, type Operation } from '../../../handlers/index.js';
import { watchOperations } from '../../../handlers/watch.js';
import { authenticateRequest, runRequest, type AppServices, type RequestResult } from '../../request.js';
import { readBody } from '../body.js';
import { requestMeta, type AppEnv, type PeerAddress } from '../env.js';
import { serveWatch } from '../watch-sse.js';
import { ASSETS } from './assets.js';
import {
  UI_PATH,
  clearSessionCookie,
  currentSession,
  endSession,
  forgetSession,
  hasSessionCookie,
  startSession,
  type SessionOptions,
} from './session.js';
import { buildTimeline, type HistoryRow } from './timeline.js';
import {
  ClassesPage,
  ClassPage,
  ErrorPage,
  HistoryPage,
  RecordPage,
  RecordsPage,
  SignInPage,
  historyHref,
  recordHref,
  recordsHref,
  type ClassView,
  type FieldValueView,
} from './views.js';

/** A sign-in form body: a credential (a JWT is a few KiB) and its field name. */
const MAX_FORM_BYTES = 16 * 1024;
/** How long a session lives when createApp is not told (`--ui-session-ttl`'s default). */
export const DEFAULT_SESSION_TTL_MS = 8 * 3600_000;
/** What the sign-in page says when a cookie names a session that is gone. */
const SESSION_ENDED =
  'Your console session has ended (it expired, you signed out, or it was replaced by a newer sign-in of the same identity); sign in again.';
/** Rows of history per timeline page. */
const HISTORY_PAGE = 500;

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

type C = Context<AppEnv>;

/** Mount the console's routes on the API app. */
export function mountConsole(app: Hono<AppEnv>, s: AppServices, peer: PeerAddress, opts: SessionOptions = { ttlMs: DEFAULT_SESSION_TTL_MS }): void {
  app.use(`${UI_PATH}/*`, async (c, next) => {
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(k, v);
    if (!c.res.headers.has('cache-control')) c.res.headers.set('cache-control', 'no-store');
  });
  app.use(UI_PATH, async (c, next) => {
    await next();
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(k, v);
    c.res.headers.set('cache-control', 'no-store');
  });

  app.get(`${UI_PATH}/assets/:name`, (c) => {
    const a = ASSETS.get(c.req.path);
    if (!a) return c.text('No such asset.', 404);
    return c.body(a.body, 200, { 'content-type': a.type, 'cache-control': 'public, max-age=31536000, immutable' });
  });

  app.get(UI_PATH, (c) => (hasSessionCookie(c, s) ? classesPage(c, s, peer) : c.html(<SignInPage />)));
  app.get(`${UI_PATH}/`, (c) => c.redirect(UI_PATH, 301));
  app.get(`${UI_PATH}/sign-in`, (c) => c.html(<SignInPage />));
  app.post(`${UI_PATH}/sign-in`, (c) => signIn(c, s, peer, opts));
  app.post(`${UI_PATH}/sign-out`, async (c) => {
    const refused = checkOrigin(c);
    if (refused) return refused;
    try {
      await endSession(c, s);
    } catch (e) {
      // The row could not be deleted: say so rather than pretend (the cookie stays).
      return failure(c, s, e, 'Signing out failed; try again.');
    }
    return c.html(<SignInPage notice="You are signed out." />);
  });
  app.get(`${UI_PATH}/classes/:class`, (c) => classPage(c, s, peer));
  app.get(`${UI_PATH}/classes/:class/records`, (c) => recordsPage(c, s, peer));
  app.get(`${UI_PATH}/records/:class/:id`, (c) => recordPage(c, s, peer));
  app.get(`${UI_PATH}/records/:class/:id/history`, (c) => historyPage(c, s, peer));
  // The record page's live part: the record's watch stream with the session's credential (an
  // EventSource cannot send an Authorization header), the same handler and refusals as
  // GET /v1/records/{class}/{id}/watch.
  app.get(`${UI_PATH}/records/:class/:id/watch`, async (c) => {
    let authorization: string | undefined;
    try {
      const session = await currentSession(c, s);
      if (session.kind === 'live') authorization = `Bearer ${session.credential}`;
    } catch (e) {
      const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') });
      c.set('errorCode', err.code);
      return c.json(err.body(), err.status as 503);
    }
    const meta = { ...requestMeta(c, s, peer), authorization, scope: undefined };
    return serveWatch(c, s, watchOperations.watchRecord as Operation, meta);
  });
}

/** A page for a fault outside the handlers (the session store): its code and message, on the sign-in form. */
function failure(c: C, s: AppServices, e: unknown, fallback: string): Response | Promise<Response> {
  const err = asSvcError(e, { log: s.log, requestId: c.get('requestId') });
  c.set('errorCode', err.code);
  return c.html(<SignInPage error={{ code: err.code, message: err.code === 'INTERNAL' ? fallback : err.message }} />, err.status as 503);
}

/**
 * CSRF: the cookie is SameSite=Strict, and a POST must also come from a page of this origin:
 * its Origin names this host, or (pages are served with Referrer-Policy: no-referrer, under
 * which browsers send `Origin: null` on a form POST) the browser's own Sec-Fetch-Site says
 * same-origin; a page cannot forge either header. Anything else is refused with 403.
 */
function checkOrigin(c: C): Response | Promise<Response> | null {
  const origin = c.req.header('origin');
  const host = c.req.header('host');
  let ok = false;
  if (origin && origin !== 'null') {
    try {
      ok = host !== undefined && new URL(origin).host === host;
    } catch {
      ok = false;
    }
  } else {
    ok = c.req.header('sec-fetch-site') === 'same-origin';
  }
  if (ok) return null;
  c.set('errorCode', 'FORBIDDEN');
  return c.html(
    <ErrorPage title="Refused" code="FORBIDDEN" message="This form must be sent from a page of the console itself (its origin did not match)." />,
    403,
  );
}

async function signIn(c: C, s: AppServices, peer: PeerAddress, opts: SessionOptions): Promise<Response> {
  const refused = checkOrigin(c);
  if (refused) return refused;
  const body = await readBody(c.req.raw, MAX_FORM_BYTES);
  if (body.kind !== 'text') {
    const message =
      body.kind === 'too-large'
        ? `The form is larger than ${MAX_FORM_BYTES / 1024} KiB; paste only the credential.`
        : 'Paste your credential in the form and send it.';
    return c.html(<SignInPage error={{ code: 'MALFORMED', message }} />, 400);
  }
  const token = (new URLSearchParams(body.text).get('token') ?? '').trim();
  if (token === '') {
    return c.html(<SignInPage error={{ code: 'MALFORMED', message: 'Paste your credential in the form and send it.' }} />, 400);
  }
  const meta = requestMeta(c, s, peer);
  let author: string;
  try {
    author = (await authenticateRequest(s, meta.address, `Bearer ${token}`)).author;
    c.set('author', author);
  } catch (e) {
    const err = e as SvcError;
    c.set('errorCode', err.code ?? 'INTERNAL');
    const status = (err.status ?? 500) as 401;
    const message =
      err.code === 'UNAUTHENTICATED'
        ? `That credential was refused: ${err.message}`
        : (err.message ?? 'The credential could not be checked; try again.');
    return c.html(<SignInPage error={{ code: err.code ?? 'INTERNAL', message }} />, status);
  }
  try {
    await startSession(c, s, opts, token, author);
  } catch (e) {
    return failure(c, s, e, 'The session could not be started; try again.');
  }
  return c.redirect(UI_PATH, 303);
}

/**
 * Call one operation as the signed-in person: the credential comes from the session the
 * cookie names, and is authenticated again, as every API request is. A session whose
 * credential is refused (a revoked key, an expired token) is deleted; a cookie naming no live
 * session costs the rejected-credential budget like a refused credential.
 */
async function call<I>(c: C, s: AppServices, peer: PeerAddress, op: Operation<I>, input: I): Promise<RequestResult> {
  const meta = requestMeta(c, s, peer);
  let r: RequestResult;
  try {
    const session = s.budget.isExhausted(meta.address) ? ({ kind: 'none' } as const) : await currentSession(c, s);
    if (session.kind === 'ended') {
      r = { ok: false, error: await sessionEnded(s, meta.address), lsn: null };
    } else {
      const authorization = session.kind === 'live' ? `Bearer ${session.credential}` : undefined;
      r = await runRequest(s, { ...meta, authorization, scope: undefined }, op, () => input);
      if (session.kind === 'live' && !r.ok && r.error.code === 'UNAUTHENTICATED') await forgetSession(c, s);
    }
  } catch (e) {
    r = { ok: false, error: asSvcError(e, { log: s.log, requestId: meta.requestId }), lsn: null };
  }
  if (r.identity) c.set('author', r.identity.author);
  if (!r.ok) c.set('errorCode', r.error.code);
  return r;
}

/** The refusal of a cookie that names no live session: the budget's answer, or UNAUTHENTICATED saying the session ended. */
async function sessionEnded(s: AppServices, address: string): Promise<SvcError> {
  try {
    await authenticateRequest(s, address, undefined);
  } catch (e) {
    if (e instanceof SvcError && e.code !== 'UNAUTHENTICATED') return e;
  }
  return new SvcError('UNAUTHENTICATED', SESSION_ENDED);
}

/**
 * The page for a refused call: a credential that no longer works (or none) goes back to the
 * sign-in form, which clears the cookie; anything else is shown with its code and message.
 */
function refusal(c: C, s: AppServices, r: Extract<RequestResult, { ok: false }>, title: string, back?: { href: string; text: string }): Response | Promise<Response> {
  const { code, message } = r.error;
  if (!r.identity) {
    // Not signed in: the sign-in form (a plain redirect, not an error page).
    if (!hasSessionCookie(c, s)) return c.redirect(`${UI_PATH}/sign-in`, 303);
    if (code === 'UNAUTHENTICATED') clearSessionCookie(c, s);
    // A refused credential gets a notice; an ended session's message says it all.
    const notice = code === 'UNAUTHENTICATED' && message !== SESSION_ENDED ? 'Your credential is no longer accepted; sign in again.' : undefined;
    return c.html(<SignInPage notice={notice} error={{ code, message }} />, r.error.status as 401);
  }
  return c.html(<ErrorPage who={r.identity.author} title={title} code={code} message={message} back={back} />, r.error.status as 403);
}

function page(c: C, el: JSX.Element): Response | Promise<Response> {
  return c.html(el);
}

async function classesPage(c: C, s: AppServices, peer: PeerAddress): Promise<Response> {
  const r = await call(c, s, peer, operations.classes, { params: [] });
  if (!r.ok) return refusal(c, s, r, 'Classes');
  const body = r.out.body as { classes: { name: string; gone?: boolean }[] };
  return page(c, <ClassesPage who={r.identity.author} classes={body.classes} />);
}

async function classPage(c: C, s: AppServices, peer: PeerAddress): Promise<Response> {
  const name = c.req.param('class')!;
  const r = await call(c, s, peer, operations.class, { name, params: [] });
  if (!r.ok) return refusal(c, s, r, `Class ${name}`, { href: UI_PATH, text: 'Classes' });
  const cls = r.out.body as unknown as ClassView;
  const mine = myRoles(cls, r.identity.author).map(([n]) => n);
  return page(c, <ClassPage who={r.identity.author} cls={cls} mine={mine} />);
}

/** The caller's roles in a class, as the class operation shows them. */
function myRoles(view: ClassView, author: string) {
  return Object.entries(view.roles).filter(([, role]) => role.subjects.some((sub) => subjectMatches(sub, author)));
}

/** Fields some role of the caller may read. */
function readable(view: ClassView, author: string): string[] {
  const roles = myRoles(view, author).map(([, r]) => r);
  return Object.keys(view.fields).filter((f) => roles.some((r) => r.read.includes('*') || r.read.includes(f)));
}

/** The query string's names, repeats included (the handlers refuse repeats as the API does). */
function queryNames(c: C): string[] {
  return [...new URL(c.req.url).searchParams.keys()];
}

async function recordsPage(c: C, s: AppServices, peer: PeerAddress): Promise<Response> {
  const cls = c.req.param('class')!;
  const def = await call(c, s, peer, operations.class, { name: cls, params: [] });
  if (!def.ok) return refusal(c, s, def, `Records of ${cls}`, { href: UI_PATH, text: 'Classes' });
  const view = def.out.body as unknown as ClassView;
  const q = c.req.query();
  // An empty box in the form means no filter on that field.
  const { limit: rawLimit, after: rawAfter, ...rest } = q;
  const filters = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== ''));
  const limit = rawLimit || undefined;
  const after = rawAfter || undefined;
  const names = queryNames(c).filter((n) => (n === 'limit' ? limit !== undefined : n === 'after' ? after !== undefined : n in filters));
  const r = await call(c, s, peer, operations.query, { class: cls, filters, limit, after, params: names });
  const filterable = readable(view, def.identity.author).filter((f) => view.fields[f].kind !== 'append');
  const base = new URLSearchParams(filters);
  if (limit !== undefined) base.set('limit', limit);
  const link = (extra?: string) => {
    const p = new URLSearchParams(base);
    if (extra) p.set('after', extra);
    const qs = p.toString();
    return `${recordsHref(cls)}${qs ? `?${qs}` : ''}`;
  };
  if (!r.ok) {
    if (!r.identity) return refusal(c, s, r, `Records of ${cls}`);
    return c.html(
      <RecordsPage who={def.identity.author} cls={cls} filterable={filterable} filters={filters} limit={limit} records={[]} error={r.error} />,
      r.error.status as 400,
    );
  }
  const body = r.out.body as { records: { record: string; record_version: number; fields: Record<string, FieldValueView> }[]; next_after?: string };
  return page(
    c,
    <RecordsPage
      who={r.identity.author}
      cls={cls}
      filterable={filterable}
      filters={filters}
      limit={limit}
      records={body.records}
      nextHref={body.next_after ? link(body.next_after) : undefined}
      firstHref={after !== undefined ? link() : undefined}
    />,
  );
}

async function recordPage(c: C, s: AppServices, peer: PeerAddress): Promise<Response> {
  const cls = c.req.param('class')!;
  const id = c.req.param('id')!;
  const back = { href: recordsHref(cls), text: `Records of ${cls}` };
  const r = await call(c, s, peer, operations.get, { class: cls, id, params: [] });
  if (!r.ok) return refusal(c, s, r, `${cls}/${id}`, back);
  const def = await call(c, s, peer, operations.class, { name: cls, params: [] });
  if (!def.ok) return refusal(c, s, def, `${cls}/${id}`, back);
  const view = def.out.body as unknown as ClassView;
  const roles = myRoles(view, r.identity.author).map(([n]) => n);
  const checkpoints = [];
  for (const role of roles) {
    const cp = await call(c, s, peer, operations.checkpointLoad, { class: cls, id, role, params: ['role'] });
    if (cp.ok) checkpoints.push(cp.out.body as any);
    else checkpoints.push({ role, document: null, record_version: 0, changed_fields: [], error: `${cp.error.code}: ${cp.error.message}` });
  }
  const body = r.out.body as { record_version: number; fields: Record<string, FieldValueView> };
  return page(
    c,
    <RecordPage
      who={r.identity.author}
      cls={cls}
      id={id}
      recordVersion={body.record_version}
      defs={view.fields}
      fields={body.fields}
      checkpoints={checkpoints}
      now={new Date()}
      watch={`${recordHref(cls, id)}/watch?from_record_version=${body.record_version}`}
    />,
  );
}

async function historyPage(c: C, s: AppServices, peer: PeerAddress): Promise<Response> {
  const cls = c.req.param('class')!;
  const id = c.req.param('id')!;
  const q = c.req.query();
  const field = q.field || undefined;
  const author = q.author || undefined;
  const outcome = q.outcome || undefined;
  const before = q.before || undefined;
  const params = [...(field ? ['field'] : []), ...(before ? ['before'] : []), 'limit'];
  const r = await call(c, s, peer, operations.history, { class: cls, id, field, before, limit: HISTORY_PAGE, params });
  if (!r.ok) return refusal(c, s, r, `History of ${cls}/${id}`, { href: recordsHref(cls), text: `Records of ${cls}` });
  const body = r.out.body as { history: HistoryRow[]; next_before?: string; truncated_before?: string };
  // Diffs are worked out over every row of the page; author and outcome only choose what is shown.
  // A page that reaches purged rows (retention) is not the whole story either.
  const all = buildTimeline(body.history, before === undefined && body.next_before === undefined && body.truncated_before === undefined);
  const shown = all.filter(
    (a) =>
      (!author || a.row.author === author) &&
      (!outcome || (outcome === 'rejected' ? a.row.outcome !== 'applied' : a.row.outcome === outcome)),
  );
  const def = await call(c, s, peer, operations.class, { name: cls, params: [] });
  const fields = def.ok ? readable(def.out.body as unknown as ClassView, r.identity.author) : [...new Set(body.history.map((h) => h.field))];
  let olderHref: string | undefined;
  if (body.next_before) {
    const p = new URLSearchParams();
    if (field) p.set('field', field);
    if (author) p.set('author', author);
    if (outcome) p.set('outcome', outcome);
    p.set('before', body.next_before);
    olderHref = `${historyHref(cls, id)}?${p}`;
  }
  return page(
    c,
    <HistoryPage
      who={r.identity.author}
      cls={cls}
      id={id}
      fields={fields}
      authors={[...new Set(body.history.map((h) => h.author))].sort()}
      filter={{ field, author, outcome }}
      attempts={shown}
      total={all.length}
      olderHref={olderHref}
      truncatedBefore={body.truncated_before}
    />,
  );
}

