/**
 * The console's pages as Hono JSX (server-rendered; docs/console.md). Every value from the
 * database or the request goes in as text or an attribute, which Hono JSX escapes; nothing
 * is inserted as raw HTML. No inline script or style: the CSP forbids both.
 */
import { raw } from 'hono/html';
import type { Child } from 'hono/jsx';
import { CSS_ASSET, JS_ASSET } from './assets.js';
import { KNOWN_OUTCOMES, pretty, type Attempt, type DiffPart } from './timeline.js';

const enc = encodeURIComponent;
export const classHref = (cls: string) => `/ui/classes/${enc(cls)}`;
export const recordsHref = (cls: string) => `/ui/classes/${enc(cls)}/records`;
export const recordHref = (cls: string, id: string) => `/ui/records/${enc(cls)}/${enc(id)}`;
export const historyHref = (cls: string, id: string) => `${recordHref(cls, id)}/history`;

export function Layout(props: { title: string; who?: string; children?: Child; watch?: string }) {
  // The doctype (standards mode) is the only raw HTML of the console: a constant.
  return (
    <>
      {raw('<!DOCTYPE html>')}
      <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${props.title} · kslate console`}</title>
        <link rel="stylesheet" href={CSS_ASSET.path} />
        <script src={JS_ASSET.path} defer></script>
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <a class="brand" href="/ui">
            kslate console
          </a>
          {props.who ? (
            <>
              <nav aria-label="Main">
                <a href="/ui">Classes</a>
              </nav>
              <span class="who">
                Signed in as <strong>{props.who}</strong>
              </span>
              <form method="post" action="/ui/sign-out">
                <button type="submit">Sign out</button>
              </form>
            </>
          ) : null}
        </header>
        <main id="main" tabindex={-1} data-watch={props.watch}>
          {props.children}
        </main>
      </body>
      </html>
    </>
  );
}

export function ErrorBox(props: { code: string; message: string }) {
  return (
    <div class="error" role="alert">
      <strong>{props.code}</strong>: {props.message}
    </div>
  );
}

export function SignInPage(props: { error?: { code: string; message: string }; notice?: string }) {
  return (
    <Layout title="Sign in">
      <h1>Sign in</h1>
      {props.notice ? <p class="notice">{props.notice}</p> : null}
      {props.error ? <ErrorBox code={props.error.code} message={props.error.message} /> : null}
      <form class="stack" method="post" action="/ui/sign-in">
        <label for="token">
          Credential
          <input id="token" name="token" type="password" autocomplete="off" required />
        </label>
        <p class="muted">
          Paste the bearer credential you give the API (an API key, an OIDC token or a Kubernetes service-account token). It is
          checked like an API request and kept only in an HttpOnly cookie for this console; the console never writes.
        </p>
        <button class="primary" type="submit">
          Sign in
        </button>
      </form>
    </Layout>
  );
}

export function ErrorPage(props: { who?: string; title: string; code: string; message: string; back?: { href: string; text: string } }) {
  return (
    <Layout title={props.title} who={props.who}>
      <h1>{props.title}</h1>
      <ErrorBox code={props.code} message={props.message} />
      {props.back ? (
        <p>
          <a href={props.back.href}>{props.back.text}</a>
        </p>
      ) : null}
    </Layout>
  );
}

export function ClassesPage(props: { who: string; classes: { name: string; gone?: boolean }[] }) {
  return (
    <Layout title="Classes" who={props.who}>
      <h1>Classes</h1>
      {props.classes.length === 0 ? (
        <p>You hold no role in any class. A class's manifest names the identities of each role.</p>
      ) : (
        <ul>
          {props.classes.map((c) => (
            <li>
              <a href={classHref(c.name)}>{c.name}</a>
              {c.gone ? <span class="badge warn"> gone</span> : null} · <a href={recordsHref(c.name)}>records</a>
            </li>
          ))}
        </ul>
      )}
    </Layout>
  );
}

export interface FieldDefView {
  kind: string;
  type?: string;
  enum?: unknown[];
  requireEvidence?: boolean;
  minIdentityStrength?: string;
  leaseSeconds?: number;
}

export interface ClassView {
  name: string;
  namespace: string;
  fields: Record<string, FieldDefView>;
  roles: Record<string, { subjects: string[]; read: string[]; write: string[] }>;
  ttl: string | null;
  checkpoint: { sections?: string[]; requiredForResolve?: string[] };
  idPattern: string | null;
  minIdentityStrength: string;
  requireEvidence: boolean;
  gone: boolean;
}

const allows = (list: string[], f: string) => list.includes('*') || list.includes(f);

export function ClassPage(props: { who: string; cls: ClassView; mine: string[] }) {
  const c = props.cls;
  const mine = props.mine.map((r) => [r, c.roles[r]] as const);
  return (
    <Layout title={`Class ${c.name}`} who={props.who}>
      <h1>Class {c.name}</h1>
      <p>
        <a href={recordsHref(c.name)}>Records of {c.name}</a>
      </p>
      <dl class="meta">
        <dt>Namespace</dt>
        <dd>{c.namespace}</dd>
        <dt>Your roles</dt>
        <dd>{props.mine.join(', ')}</dd>
        <dt>Record ids</dt>
        <dd>{c.idPattern ? <code>{c.idPattern}</code> : 'any'}</dd>
        <dt>Minimum identity strength</dt>
        <dd>{c.minIdentityStrength}</dd>
        <dt>Evidence required</dt>
        <dd>{c.requireEvidence ? 'yes, on every write' : 'where a field demands it'}</dd>
        <dt>Records expire</dt>
        <dd>{c.ttl ?? 'never'}</dd>
        <dt>Checkpoint sections</dt>
        <dd>{(c.checkpoint.sections ?? []).join(', ') || 'none'}</dd>
        <dt>Checkpoint required to resolve</dt>
        <dd>{(c.checkpoint.requiredForResolve ?? []).join(', ') || 'no role'}</dd>
        {c.gone ? (
          <>
            <dt>State</dt>
            <dd>
              <span class="badge warn">gone</span> (its manifest was removed)
            </dd>
          </>
        ) : null}
      </dl>
      <h2>Fields</h2>
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Field</th>
              <th scope="col">Kind</th>
              <th scope="col">Type</th>
              <th scope="col">Enum</th>
              <th scope="col">Floors</th>
              <th scope="col">You may</th>
            </tr>
          </thead>
          <tbody>
            {Object.entries(c.fields).map(([name, f]) => {
              const read = mine.some(([, r]) => r && allows(r.read, name));
              const write = mine.some(([, r]) => r && allows(r.write, name));
              const floors = [
                f.minIdentityStrength ? `minIdentityStrength: ${f.minIdentityStrength}` : '',
                f.requireEvidence ? 'requireEvidence' : '',
                f.leaseSeconds !== undefined ? `lease ${f.leaseSeconds}s` : '',
              ].filter(Boolean);
              return (
                <tr data-field={name}>
                  <th scope="row">{name}</th>
                  <td>{f.kind}</td>
                  <td>{f.type ?? 'any'}</td>
                  <td>{f.enum ? f.enum.map((e) => JSON.stringify(e)).join(', ') : ''}</td>
                  <td>{floors.join('; ')}</td>
                  <td>
                    {read ? <span class="badge ok">read</span> : <span class="badge bad">no read</span>}{' '}
                    {write ? <span class="badge ok">write</span> : <span class="badge muted">no write</span>}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </Layout>
  );
}

export interface FieldValueView {
  value?: unknown;
  version: number;
  author?: string;
  identity_strength?: string;
  evidence?: unknown;
  based_on?: { field: string; version: number; kind?: string }[];
  invocation?: unknown;
  updated_at?: string;
  owner?: string;
  lease_expires_at?: string;
  lease_lapsed?: boolean;
  entries?: { seq: number; value: unknown; author: string; evidence?: unknown; updated_at: string }[];
}

function Json(props: { v: unknown }) {
  return <pre>{pretty(props.v)}</pre>;
}

function Premises(props: { list?: { field: string; version: number; kind?: string }[] }) {
  if (!props.list || props.list.length === 0) return <span class="muted">none</span>;
  return <span>{props.list.map((p) => `${p.field} v${p.version}${p.kind === 'fence' ? ' (fence)' : ''}`).join(', ')}</span>;
}

function secondsLeft(iso: string, now: Date): number {
  return Math.max(0, Math.round((Date.parse(iso) - now.getTime()) / 1000));
}

export function countdownText(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  return `${h ? `${h}h ` : ''}${h || m ? `${m}m ` : ''}${s}s`;
}

function Lease(props: { f: FieldValueView; now: Date }) {
  const f = props.f;
  if (f.lease_lapsed) {
    return (
      <span>
        <span class="badge bad">lease lapsed</span> {f.owner ? `held by ${f.owner} until it expired` : 'nobody has reclaimed it'}
      </span>
    );
  }
  if (!f.owner || !f.lease_expires_at) return <span class="muted">not held</span>;
  const left = secondsLeft(f.lease_expires_at, props.now);
  return (
    <span>
      held by <strong>{f.owner}</strong>;{' '}
      <span class="countdown" data-expires={f.lease_expires_at}>
        expires in <span class="left">{countdownText(left)}</span> (at <time datetime={f.lease_expires_at}>{f.lease_expires_at}</time>)
      </span>
    </span>
  );
}

export function RecordPage(props: {
  who: string;
  cls: string;
  id: string;
  recordVersion: number;
  defs: Record<string, FieldDefView>;
  fields: Record<string, FieldValueView>;
  checkpoints: { role: string; document: unknown; record_version: number; changed_fields: { field: string; version: number; author: string }[]; error?: string }[];
  now: Date;
  watch?: string;
}) {
  const names = Object.keys(props.fields);
  return (
    <Layout title={`${props.cls}/${props.id}`} who={props.who} watch={props.watch}>
      <p>
        <a href={recordsHref(props.cls)}>Records of {props.cls}</a>
      </p>
      <h1>
        Record {props.cls}/{props.id}
      </h1>
      <p id="live-note" class="notice" role="status" hidden>
        {' '}
      </p>
      <p data-live="version">
        Record version <strong>{props.recordVersion}</strong> · <a href={historyHref(props.cls, props.id)}>History timeline</a>
      </p>
      <h2>Fields</h2>
      <div data-live="fields">
        {names.length === 0 ? <p>No field you may read has a value.</p> : null}
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Field</th>
                <th scope="col">Value</th>
                <th scope="col">Version</th>
                <th scope="col">Author</th>
                <th scope="col">Identity strength</th>
                <th scope="col">Evidence</th>
                <th scope="col">Premises</th>
                <th scope="col">Invocation</th>
              </tr>
            </thead>
            <tbody>
              {names.map((name) => {
                const f = props.fields[name];
                const kind = props.defs[name]?.kind ?? 'versioned';
                return (
                  <tr data-field={name}>
                    <th scope="row">
                      {name} <span class="muted">({kind})</span>
                    </th>
                    <td data-k="value">
                      {kind === 'task' ? (
                        <Lease f={f} now={props.now} />
                      ) : kind === 'append' ? (
                        <ol>
                          {(f.entries ?? []).map((e) => (
                            <li>
                              <Json v={e.value} />
                              <span class="muted">
                                by {e.author}
                                {e.evidence !== undefined ? ` · evidence ${pretty(e.evidence)}` : ''}
                              </span>
                            </li>
                          ))}
                        </ol>
                      ) : (
                        <Json v={f.value} />
                      )}
                    </td>
                    <td data-k="version">{f.version}</td>
                    <td data-k="author">{f.author ?? ''}</td>
                    <td data-k="identity_strength">{f.identity_strength ?? ''}</td>
                    <td>{f.evidence !== undefined ? <Json v={f.evidence} /> : <span class="muted">none</span>}</td>
                    <td>
                      <Premises list={f.based_on} />
                    </td>
                    <td>{f.invocation !== undefined ? <Json v={f.invocation} /> : <span class="muted">none</span>}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      </div>
      <h2>Checkpoints</h2>
      <div data-live="checkpoints">
        {props.checkpoints.map((cp) => (
          <section aria-label={`Checkpoint of role ${cp.role}`}>
            <h3>Role {cp.role}</h3>
            {cp.error ? (
              <p class="error">{cp.error}</p>
            ) : (
              <>
                {cp.document === null ? (
                  <p class="muted">No checkpoint saved.</p>
                ) : (
                  <>
                    <p>Saved at record version {cp.record_version}.</p>
                    <Json v={cp.document} />
                  </>
                )}
                <p>
                  Changed since {cp.document === null ? '(every field written so far)' : 'it was saved'}:{' '}
                  {cp.changed_fields.length === 0 ? (
                    <span class="muted">nothing</span>
                  ) : (
                    cp.changed_fields.map((c) => `${c.field} v${c.version} by ${c.author}`).join(', ')
                  )}
                </p>
              </>
            )}
          </section>
        ))}
      </div>
    </Layout>
  );
}

export function RecordsPage(props: {
  who: string;
  cls: string;
  filterable: string[];
  filters: Record<string, string>;
  limit?: string;
  records: { record: string; record_version: number; fields: Record<string, FieldValueView> }[];
  nextHref?: string;
  firstHref?: string;
  error?: { code: string; message: string };
}) {
  const columns = [...new Set(props.records.flatMap((r) => Object.keys(r.fields)))];
  return (
    <Layout title={`Records of ${props.cls}`} who={props.who}>
      <p>
        <a href={classHref(props.cls)}>Class {props.cls}</a>
      </p>
      <h1>Records of {props.cls}</h1>
      <form class="filters" method="get" action={recordsHref(props.cls)} aria-label="Query">
        {props.filterable.map((f) => (
          <label>
            {f}
            <input name={f} value={props.filters[f] ?? ''} />
          </label>
        ))}
        <label>
          per page
          <input name="limit" inputmode="numeric" size={5} value={props.limit ?? ''} />
        </label>
        <button type="submit">Query</button>
      </form>
      <p class="muted">Each filter matches a field's current value exactly (a task field matches its owner), as the API's query does.</p>
      {props.error ? <ErrorBox code={props.error.code} message={props.error.message} /> : null}
      {props.records.length === 0 && !props.error ? <p>No records match.</p> : null}
      {props.records.length > 0 ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Record</th>
                <th scope="col">Version</th>
                {columns.map((c) => (
                  <th scope="col">{c}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {props.records.map((r) => {
                const id = r.record.slice(props.cls.length + 1);
                return (
                  <tr>
                    <th scope="row">
                      <a href={recordHref(props.cls, id)}>{id}</a>
                    </th>
                    <td>{r.record_version}</td>
                    {columns.map((c) => {
                      const f = r.fields[c];
                      if (!f) return <td></td>;
                      if (f.owner) return <td>{`held by ${f.owner}`}</td>;
                      if (f.entries) return <td>{`${f.version} entries`}</td>;
                      return <td>{f.value === undefined ? '' : typeof f.value === 'string' ? f.value : JSON.stringify(f.value)}</td>;
                    })}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      <nav class="pager" aria-label="Pages">
        {props.firstHref ? <a href={props.firstHref}>First page</a> : null}
        {props.nextHref ? (
          <a href={props.nextHref} rel="next">
            Next page
          </a>
        ) : null}
      </nav>
    </Layout>
  );
}

function Diff(props: { parts: DiffPart[]; label: string }) {
  return (
    <div class="diff">
      <p class="muted">{props.label}</p>
      <pre>
        {props.parts.map((p) =>
          p.kind === 'added' ? (
            <ins>{prefixLines('+ ', p.text)}</ins>
          ) : p.kind === 'removed' ? (
            <del>{prefixLines('- ', p.text)}</del>
          ) : (
            <span class="same">{prefixLines('  ', p.text)}</span>
          ),
        )}
      </pre>
    </div>
  );
}

const prefixLines = (prefix: string, text: string) =>
  text
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');

function AttemptItem(props: { a: Attempt }) {
  const { a } = props;
  const r = a.row;
  if (a.writes) {
    // A transaction: one attempt, its writes inside it in order.
    return (
      <li class={a.tone} data-outcome={r.outcome} data-seq={r.seq} data-transaction={r.transaction?.id}>
        <div class="attempt-head">
          <span class={`badge ${a.tone}`}>{a.label}</span>
          <strong>transaction</strong>
          <span>by {r.author}</span>
          <time datetime={r.created_at}>{r.created_at}</time>
          {a.marks.map((m) => (
            <span class={`badge ${m.tone}`}>{m.text}</span>
          ))}
        </div>
        <ol class="timeline">
          {a.writes.map((w) => (
            <AttemptItem a={w} />
          ))}
        </ol>
      </li>
    );
  }
  return (
    <li class={a.tone} data-outcome={r.outcome} data-seq={r.seq}>
      <div class="attempt-head">
        <span class={`badge ${a.tone}`}>{a.label}</span>
        <strong>
          {r.op} {r.field}
          {r.version !== undefined ? ` → v${r.version}` : ''}
        </strong>
        <span>by {r.author}</span>
        <time datetime={r.created_at}>{r.created_at}</time>
        {a.marks.map((m) => (
          <span class={`badge ${m.tone}`}>{m.text}</span>
        ))}
      </div>
      <dl class="meta">
        {r.value !== undefined ? (
          <>
            <dt>{r.outcome === 'applied' ? 'Value' : 'Wanted'}</dt>
            <dd>
              <Json v={r.value} />
            </dd>
          </>
        ) : null}
        {r.value_sha256 ? (
          <>
            <dt>Value</dt>
            <dd>
              {r.value_size} bytes, sha256 {r.value_sha256}
            </dd>
          </>
        ) : null}
        {r.expected_version !== undefined ? (
          <>
            <dt>Expected version</dt>
            <dd>{r.expected_version}</dd>
          </>
        ) : null}
        {r.record_version !== undefined ? (
          <>
            <dt>Record version</dt>
            <dd>{r.record_version}</dd>
          </>
        ) : null}
        {r.identity_strength ? (
          <>
            <dt>Identity strength</dt>
            <dd>{r.identity_strength}</dd>
          </>
        ) : null}
        {r.evidence !== undefined ? (
          <>
            <dt>Evidence</dt>
            <dd>
              <Json v={r.evidence} />
            </dd>
          </>
        ) : null}
        {r.based_on ? (
          <>
            <dt>Premises</dt>
            <dd>
              <Premises list={r.based_on} />
            </dd>
          </>
        ) : null}
        {r.invocation !== undefined ? (
          <>
            <dt>Invocation</dt>
            <dd>
              <Json v={r.invocation} />
            </dd>
          </>
        ) : null}
      </dl>
      {a.stale ? (
        a.stale.diff ? (
          <Diff
            parts={a.stale.diff}
            label={`${r.field} had moved to v${a.stale.version ?? 0}${a.stale.author ? ` (by ${a.stale.author})` : ''}; what it held (−) against what this attempt wanted (+):`}
          />
        ) : (
          <p class="muted">The write that moved {r.field} is older than this page.</p>
        )
      ) : null}
      {a.moved ? (
        <div class="moved">
          <p>Premises that had moved:</p>
          <ul>
            {a.moved.map((m) => (
              <li>
                {m.field}
                {m.kind === 'fence' ? ' (fence: the lease changed hands or was renewed)' : ''}: cited v{m.cited}, then{' '}
                {m.then === undefined ? 'at a version older than this page' : `v${m.then}`}
                {m.author ? ` by ${m.author}` : ''}
                {m.diff ? <Diff parts={m.diff} label={`${m.field} at v${m.cited} (−) against v${m.then} (+):`} /> : null}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </li>
  );
}

export function HistoryPage(props: {
  who: string;
  cls: string;
  id: string;
  fields: string[];
  authors: string[];
  filter: { field?: string; author?: string; outcome?: string };
  attempts: Attempt[];
  total: number;
  olderHref?: string;
  /** The page reaches where class history retention purged rows (issue 37), up to this time. */
  truncatedBefore?: string;
  error?: { code: string; message: string };
}) {
  const outcomes = [...new Set([...KNOWN_OUTCOMES, ...props.attempts.map((a) => a.row.outcome)])];
  return (
    <Layout title={`History of ${props.cls}/${props.id}`} who={props.who}>
      <p>
        <a href={recordHref(props.cls, props.id)}>
          Record {props.cls}/{props.id}
        </a>
      </p>
      <h1>
        History of {props.cls}/{props.id}
      </h1>
      <form class="filters" method="get" action={historyHref(props.cls, props.id)} aria-label="Filter the timeline">
        <label>
          Field
          <select name="field">
            <option value="">every field</option>
            {props.fields.map((f) => (
              <option value={f} selected={props.filter.field === f}>
                {f}
              </option>
            ))}
          </select>
        </label>
        <label>
          Author
          <select name="author">
            <option value="">anyone</option>
            {props.authors.map((f) => (
              <option value={f} selected={props.filter.author === f}>
                {f}
              </option>
            ))}
          </select>
        </label>
        <label>
          Outcome
          <select name="outcome">
            <option value="">any</option>
            <option value="rejected" selected={props.filter.outcome === 'rejected'}>
              any rejection
            </option>
            {outcomes.map((o) => (
              <option value={o} selected={props.filter.outcome === o}>
                {o}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Filter</button>
      </form>
      {props.error ? <ErrorBox code={props.error.code} message={props.error.message} /> : null}
      <p>
        {props.attempts.length} of {props.total} attempts on this page, oldest first; applied and rejected.
      </p>
      {props.truncatedBefore ? (
        <p class="truncated" role="note">
          Older attempts were purged by the class's history retention (up to {props.truncatedBefore}); the timeline
          below starts with what is left.
        </p>
      ) : null}
      <ol class="timeline">
        {props.attempts.map((a) => (
          <AttemptItem a={a} />
        ))}
      </ol>
      {props.olderHref ? (
        <nav class="pager" aria-label="Pages">
          <a href={props.olderHref}>Older attempts</a>
        </nav>
      ) : null}
    </Layout>
  );
}
