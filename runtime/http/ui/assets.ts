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
 * server rendered as text, and keeps an open record page current from the record's watch
 * stream (docs/console.md, "Live updates").
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
  var main = document.querySelector('main[data-watch]');
  // A live page may gain a lease after it loaded: it ticks whatever it holds.
  if (main || document.querySelector('[data-expires]')) { tick(); setInterval(tick, 1000); }
  if (!main || typeof EventSource !== 'function') return;

  // Live: the record page's watch stream (a same-origin, cookie-authenticated SSE route).
  // A change is not patched into the page here: the page itself is fetched again and its
  // [data-live] parts (record version, fields, checkpoints) replace the ones shown, so the
  // page reads exactly as a reload would (every field's value, evidence, premises and
  // invocation, new fields, "changed since" of each checkpoint), rendered by the server
  // alone. One fetch at a time; changes that arrive meanwhile are folded into one more.
  var note = document.getElementById('live-note');
  var say = function (text) { if (note) { note.hidden = false; note.textContent = text; } };
  var es = new EventSource(main.getAttribute('data-watch'));
  var busy = false, again = false, stopped = false;
  function stop(text) { stopped = true; es.close(); say(text); }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true; again = false;
    fetch(location.href, { credentials: 'same-origin', cache: 'no-store', headers: { accept: 'text/html' } })
      .then(function (res) {
        if (!res.ok) throw new Error('the page answered ' + res.status);
        return res.text();
      })
      .then(function (html) {
        if (stopped) return;
        var fresh = new DOMParser().parseFromString(html, 'text/html');
        var parts = document.querySelectorAll('[data-live]');
        for (var i = 0; i < parts.length; i++) {
          var next = fresh.querySelector('[data-live="' + parts[i].getAttribute('data-live') + '"]');
          if (next) parts[i].replaceWith(document.importNode(next, true));
        }
      })
      .catch(function (e) { stop('Live updates stopped: ' + e.message + '. Reload the page.'); })
      .then(function () { busy = false; if (again && !stopped) refresh(); });
  }
  es.addEventListener('change', function (ev) {
    var c;
    try { c = JSON.parse(ev.data); } catch (e) { return; }
    say('Live: ' + c.field + ' changed (' + c.op + ' by ' + c.author + '), record version ' + c.record_version + '.');
    refresh();
  });
  es.addEventListener('end', function (ev) {
    var why = '';
    try { why = JSON.parse(ev.data).message || ''; } catch (e) { /* no reason given */ }
    stop('Live updates stopped' + (why ? ': ' + why : '.') + ' Reload the page to resume.');
  });
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
