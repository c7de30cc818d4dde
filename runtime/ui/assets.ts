/**
 * The console's two static assets (docs/console.md): one stylesheet and one script of
 * progressive enhancement. They are TypeScript strings so that `npm run build` (tsc) and the
 * Workers bundle carry them without a copy step, and they are served under a content-hashed
 * name with a year-long immutable cache: a changed asset gets a new name, so no browser keeps
 * a stale one. No third-party asset, no inline script or style (the pages' CSP forbids both).
 */

const CSS = `
:root { color-scheme: light; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #fff; --soft: #f6f8fa;
  --ok: #1a7f37; --ok-bg: #dafbe1; --bad: #b42318; --bad-bg: #ffebe9; --warn: #7d4e00; --warn-bg: #fff8c5;
  --info: #0550ae; --info-bg: #ddf4ff; --focus: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; font: 1rem/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--info); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible {
  outline: 3px solid var(--focus); outline-offset: 2px; }
header.top { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; align-items: center; padding: .5rem 1rem;
  border-bottom: 1px solid var(--line); background: var(--soft); }
header.top .brand { font-weight: 700; text-decoration: none; color: var(--fg); }
header.top nav { display: flex; flex-wrap: wrap; gap: 1rem; flex: 1 1 auto; }
header.top form { margin: 0; }
.who { color: var(--muted); overflow-wrap: anywhere; }
main { padding: 1rem; max-width: 80rem; margin: 0 auto; }
h1 { font-size: 1.5rem; overflow-wrap: anywhere; }
h2 { font-size: 1.2rem; margin-top: 2rem; }
.skip { position: absolute; left: -100vw; }
.skip:focus { left: 1rem; top: .5rem; background: var(--bg); padding: .25rem .5rem; z-index: 1; }
.table-wrap { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .35rem .6rem; border-bottom: 1px solid var(--line); }
th { background: var(--soft); }
td, th { overflow-wrap: break-word; }
thead th { white-space: nowrap; }
pre, code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .9em; }
pre { white-space: pre-wrap; overflow-wrap: break-word; margin: 0; background: var(--soft); padding: .35rem .5rem; border-radius: 4px; }
.muted { color: var(--muted); }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 1rem; font-size: .85em; font-weight: 600;
  border: 1px solid currentColor; white-space: nowrap; }
.badge.ok { color: var(--ok); background: var(--ok-bg); }
.badge.bad { color: var(--bad); background: var(--bad-bg); }
.badge.warn { color: var(--warn); background: var(--warn-bg); }
.badge.info { color: var(--info); background: var(--info-bg); }
.error { border: 2px solid var(--bad); background: var(--bad-bg); padding: .75rem 1rem; border-radius: 6px; }
.notice { border: 2px solid var(--info); background: var(--info-bg); padding: .5rem 1rem; border-radius: 6px; }
form.stack { display: grid; gap: .75rem; max-width: 40rem; }
form.filters { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; margin: 1rem 0; }
form.filters label, form.stack label { display: grid; gap: .2rem; font-weight: 600; }
input, select, button { font: inherit; padding: .3rem .5rem; max-width: 100%; }
button { cursor: pointer; border: 1px solid var(--line); border-radius: 6px; background: var(--soft); }
button.primary { background: var(--focus); color: #fff; border-color: var(--focus); }
ol.timeline { list-style: none; padding: 0; margin: 0; display: grid; gap: .75rem; }
ol.timeline > li { border: 1px solid var(--line); border-left: .5rem solid var(--line); border-radius: 6px; padding: .5rem .75rem; }
ol.timeline > li.ok { border-left-color: var(--ok); }
ol.timeline > li.bad { border-left-color: var(--bad); }
ol.timeline > li.warn { border-left-color: var(--warn); }
.attempt-head { display: flex; flex-wrap: wrap; gap: .25rem .75rem; align-items: baseline; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem .75rem; margin: .5rem 0 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.diff { margin-top: .5rem; }
.diff pre { background: var(--bg); border: 1px solid var(--line); }
.diff ins { background: var(--ok-bg); color: var(--ok); text-decoration: none; display: block; }
.diff del { background: var(--bad-bg); color: var(--bad); text-decoration: none; display: block; }
.diff span.same { display: block; }
.pager { display: flex; flex-wrap: wrap; gap: 1rem; margin: 1rem 0; }
@media (max-width: 40rem) { dl.meta { grid-template-columns: 1fr; } main { padding: .5rem; } }
`;

/**
 * Progressive enhancement: every page works without it. It ticks the lease countdowns the
 * server rendered as text, and is where the record page's live update will subscribe to the
 * watch stream (the seam is `data-watch`, see docs/console.md).
 */
const JS = `'use strict';
(function () {
  function fmt(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + r + 's';
  }
  function tick() {
    var els = document.querySelectorAll('[data-expires]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var left = Date.parse(el.getAttribute('data-expires')) - Date.now();
      if (isNaN(left)) continue;
      var out = el.querySelector('.left');
      if (!out) continue;
      if (left <= 0) { out.textContent = 'lapsed'; el.classList.add('lapsed'); }
      else out.textContent = fmt(left);
    }
  }
  if (document.querySelector('[data-expires]')) { tick(); setInterval(tick, 1000); }

  // Live seam (issue 17 after the watch stream, issue 16): when the server marks the record
  // page with data-watch (the URL of a same-origin, cookie-authenticated SSE route), each
  // "change" event (docs/watch.md: {field, op, version, value?, author, ...}) updates that
  // field's row in place. The server sets no data-watch until that route exists.
  var main = document.querySelector('main[data-watch]');
  if (main && typeof EventSource === 'function') {
    var es = new EventSource(main.getAttribute('data-watch'));
    es.addEventListener('change', function (ev) {
      var c;
      try { c = JSON.parse(ev.data); } catch (e) { return; }
      var row = document.querySelector('tr[data-field="' + CSS.escape(String(c.field)) + '"]');
      var note = document.getElementById('live-note');
      if (note) { note.hidden = false; note.textContent = 'Live: ' + c.field + ' changed (' + c.op + ' by ' + c.author + '), record version ' + c.record_version + '.'; }
      if (!row) return;
      var set = function (k, v) { var el = row.querySelector('[data-k="' + k + '"]'); if (el && v !== undefined) el.textContent = typeof v === 'string' ? v : JSON.stringify(v, null, 2); };
      if (c.op === 'put') set('value', c.value);
      set('version', String(c.version));
      set('author', c.author);
      set('identity_strength', c.identity_strength);
    });
    es.addEventListener('end', function () { es.close(); });
  }
})();
`;

/** FNV-1a, 32 bits: enough to give a changed asset a new name (runtime-neutral, no crypto). */
function fnv1a(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

export interface Asset {
  path: string;
  type: string;
  body: string;
}

export const CSS_ASSET: Asset = { path: `/ui/assets/console.${fnv1a(CSS)}.css`, type: 'text/css; charset=utf-8', body: CSS };
export const JS_ASSET: Asset = { path: `/ui/assets/console.${fnv1a(JS)}.js`, type: 'text/javascript; charset=utf-8', body: JS };

export const ASSETS = new Map<string, Asset>([CSS_ASSET, JS_ASSET].map((a) => [a.path, a]));
