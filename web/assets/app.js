// The fairq dashboard. Every value from the server reaches the page as text (textContent or
// an attribute), never as HTML, so a payload or key holding markup is shown, not run.
'use strict';

const STATES = ['blocked', 'scheduled', 'running', 'retrying', 'succeeded', 'dead'];
const WINDOWS = [['1m', 60], ['5m', 300], ['15m', 900]];
let session = null;
let overview = null;
let current = null; // { refresh: async function } of the view on screen

// ---- DOM helpers -------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function link(href, ...children) {
  return el('a', { href }, ...children);
}

function keyLabel(key) {
  return key == null ? el('span', { class: 'muted nokey' }, '(no key)') : el('span', { class: 'key' }, key);
}

function badge(status) {
  return el('span', { class: 'badge ' + status, 'data-status': status }, status);
}

// ---- formatting --------------------------------------------------------------------------

function duration(ms) {
  if (ms == null) return '–';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + Math.round(s % 60) + 's';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h ' + (m % 60) + 'm';
  return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
}

function ago(at, now) {
  if (at == null) return '–';
  const d = now - at;
  return d >= 0 ? duration(d) + ' ago' : 'in ' + duration(-d);
}

function rate(r) {
  if (r == null) return '–';
  return (r >= 100 ? Math.round(r) : r.toFixed(r >= 10 ? 1 : 2)) + '/s';
}

function clock(at) {
  return at == null ? '–' : new Date(at).toLocaleString();
}

// ---- server ------------------------------------------------------------------------------

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { Accept: 'application/json' };
  const init = { credentials: 'same-origin', headers, method: options.method || 'GET' };
  if (init.method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    if (session && session.csrf) headers['X-CSRF-Token'] = session.csrf;
    init.body = JSON.stringify(options.body || {});
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    if (response.status === 401 && init.method === 'GET') location.href = '/login';
    throw new HttpError(response.status, (data && data.error) || response.statusText);
  }
  return data;
}

const enc = encodeURIComponent;

// ---- confirmation and notices ------------------------------------------------------------

function confirmAction(text) {
  const dialog = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  return new Promise((resolve) => {
    const ok = document.getElementById('confirm-ok');
    const cancel = document.getElementById('confirm-cancel');
    const done = (answer) => {
      ok.removeEventListener('click', yes);
      cancel.removeEventListener('click', no);
      dialog.removeEventListener('cancel', no);
      dialog.close();
      resolve(answer);
    };
    const yes = () => done(true);
    const no = (e) => { if (e) e.preventDefault(); done(false); };
    ok.addEventListener('click', yes);
    cancel.addEventListener('click', no);
    dialog.addEventListener('cancel', no);
    dialog.showModal();
  });
}

function notice(text, bad) {
  const box = el('p', { class: 'notice' + (bad ? ' bad' : ''), role: bad ? 'alert' : 'status' }, text);
  const view = document.getElementById('view');
  view.prepend(box);
  setTimeout(() => box.remove(), 6000);
}

// Asks, then runs `call` (a POST); signs in first when the browser has no session.
async function act(question, call, after) {
  if (!session.signed_in) {
    if (await confirmAction('Actions need the dashboard token. Sign in now?')) location.href = '/login';
    return;
  }
  if (!(await confirmAction(question))) return;
  try {
    const result = await call();
    notice(describe(result));
    if (after) after(result); else if (current) await current.refresh();
  } catch (e) {
    notice('Refused: ' + e.message, true);
  }
}

function describe(result) {
  if (!result) return 'Done.';
  if ('revived' in result) return 'Revived ' + result.revived + ' job(s).';
  if ('purged' in result) return 'Purged ' + result.purged + ' job(s).';
  if ('cancelled' in result) return 'Cancelled job ' + result.cancelled + '.';
  if ('paused' in result) return result.paused ? 'Paused.' : 'Resumed.';
  if ('removed' in result) return 'Removed queue ' + result.queue + ' and ' + result.removed + ' finished job(s).';
  return 'Done.';
}

// ---- charts ------------------------------------------------------------------------------

// Bars of jobs finished per second, one per interval of `series` ([start, rate|null]).
function chart(series, label) {
  const w = 300, h = 56, top = 12;
  const base = top + h;
  const max = Math.max(0, ...series.map((p) => p[1] || 0));
  const bar = w / Math.max(1, series.length);
  const box = svg('svg', { viewBox: `0 0 ${w} ${base + 14}`, class: 'chart', role: 'img', 'aria-label': label });
  box.append(svg('line', { x1: 0, y1: base, x2: w, y2: base, class: 'axis' }));
  series.forEach(([at, r], i) => {
    if (r == null) return;
    const bh = max > 0 ? Math.max(r > 0 ? 1 : 0, (r / max) * h) : 0;
    const rect = svg('rect', { x: i * bar + 0.5, y: base - bh, width: Math.max(1, bar - 1), height: bh });
    rect.append(svg('title', {}, `${new Date(at).toLocaleTimeString()}: ${rate(r)}`));
    box.append(rect);
  });
  box.append(svg('text', { x: 0, y: 9, class: 'label' }, 'jobs finished per second, peak ' + rate(max)));
  box.append(svg('text', { x: 0, y: base + 12, class: 'label' }, '10 min ago'));
  box.append(svg('text', { x: w, y: base + 12, class: 'label end' }, 'now'));
  return box;
}

// ---- views -------------------------------------------------------------------------------

function countsList(counts) {
  return el('dl', { class: 'counts' }, STATES.map((s) => el('div', { class: 'count ' + s },
    el('dt', {}, s), el('dd', { 'data-count': s }, counts[s]))));
}

function queueCard(q, now) {
  const health = el('span', { class: 'badge health ' + q.health.status, title: q.health.failing_since ? 'failing since ' + clock(q.health.failing_since) : '' }, q.health.status);
  return el('section', { class: 'card queue', 'data-queue': q.name },
    el('h2', {}, link('#/queues/' + enc(q.name), q.name), ' ', health, q.paused ? el('span', { class: 'badge paused' }, 'paused') : null),
    countsList(q.counts),
    el('p', { class: 'rates' },
      el('span', {}, 'throughput '),
      WINDOWS.map(([w]) => el('span', { class: 'rate', 'data-window': w }, w + ' ', el('b', {}, rate(q.throughput[w])))),
    ),
    chart(q.series, 'jobs finished per second in ' + q.name),
    el('p', { class: 'links' },
      link('#/queues/' + enc(q.name), 'Tenants'), ' · ',
      link('#/jobs?queue=' + enc(q.name), 'Jobs'), ' · ',
      link('#/jobs?queue=' + enc(q.name) + '&state=dead', 'Dead (' + q.counts.dead + ')'),
      ' · run p50 ', duration(q.processing_ms.count ? q.processing_ms.p50 : null)));
}

function overviewView() {
  const render = () => {
    const o = overview;
    if (!o) return el('p', { class: 'muted' }, 'Loading…');
    if (!o.queues.length) return el('p', { class: 'muted' }, 'No queues yet: enqueue a job and it shows here.');
    return el('div', { class: 'grid', id: 'queues' }, o.queues.map((q) => queueCard(q, o.now)));
  };
  return {
    title: 'Queues',
    async refresh(fromTick) {
      if (!fromTick) overview = await api('/api/overview');
      show(el('h1', {}, 'Queues'), render());
    },
  };
}

function latencyTable(latency) {
  return table(['window', 'started', 'wait p50', 'wait p95', 'wait p99', 'run p50', 'run p99'],
    latency.map((l) => el('tr', { 'data-window': l.window },
      el('td', {}, l.window), el('td', {}, l.started),
      el('td', {}, duration(l.wait_ms && l.wait_ms.p50)), el('td', {}, duration(l.wait_ms && l.wait_ms.p95)),
      el('td', {}, duration(l.wait_ms && l.wait_ms.p99)),
      el('td', {}, duration(l.run_ms && l.run_ms.p50)), el('td', {}, duration(l.run_ms && l.run_ms.p99)))));
}

function table(heads, rows, attrs) {
  return el('div', { class: 'table-wrap' }, el('table', attrs || {},
    el('thead', {}, el('tr', {}, heads.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows)));
}

function tenantsTable(t, queue) {
  const rows = t.tenants.map((k) => {
    const keyHref = '#/jobs?queue=' + enc(queue) + (k.key == null ? '&no_key=true' : '&key=' + enc(k.key));
    return el('tr', { class: k.behind ? 'behind' : '', 'data-key': k.key == null ? '' : k.key },
      el('th', { scope: 'row' }, link(keyHref, keyLabel(k.key))),
      el('td', { 'data-col': 'due' }, k.due),
      el('td', { 'data-col': 'later' }, k.later),
      el('td', { 'data-col': 'running' }, k.running),
      el('td', { 'data-col': 'blocked' }, k.blocked),
      el('td', { 'data-col': 'oldest' }, k.oldest_due ? link('#/jobs/' + k.oldest_due.id, duration(k.oldest_due.age_ms)) : '–'),
      el('td', { 'data-col': 'served' }, k.served),
      el('td', { 'data-col': 'share' }, el('span', { class: 'share' }, el('span', { class: 'bar', style: null, 'data-share': k.share })), ' ', Math.round(k.share * 100) + '%'),
      el('td', { 'data-col': 'p50' }, duration(k.wait_ms && k.wait_ms.p50)),
      el('td', { 'data-col': 'p99' }, duration(k.wait_ms && k.wait_ms.p99)),
      el('td', { 'data-col': 'last' }, k.last_served_at == null ? 'never' : ago(k.last_served_at, t.now)),
      el('td', {}, k.behind ? el('span', { class: 'badge dead', title: 'due jobs and no service for longer than fair scheduling explains' }, 'behind') : el('span', { class: 'muted' }, 'ok')));
  });
  const wrap = table(['key', 'due', 'later', 'running', 'blocked', 'oldest waiting', 'served', 'share', 'wait p50', 'wait p99', 'last served', ''], rows, { id: 'tenants' });
  // Bar widths are set as properties, not inline style attributes (which the page's
  // Content-Security-Policy forbids).
  wrap.querySelectorAll('.bar').forEach((b) => { b.style.width = (Number(b.dataset.share) * 100).toFixed(1) + '%'; });
  return wrap;
}

function queueView(name, params) {
  let windowS = Number(params.get('window')) || 300;
  return {
    title: name,
    async refresh() {
      const [detail, t] = await Promise.all([
        api('/api/queues/' + enc(name)),
        api('/api/queues/' + enc(name) + '/tenants?window=' + windowS),
      ]);
      const q = detail.queue;
      const caps = session.capabilities;
      const stateSelect = el('select', { id: 'purge-state', 'aria-label': 'state to purge' },
        el('option', { value: 'dead' }, 'dead'), el('option', { value: 'succeeded' }, 'succeeded'),
        el('option', { value: 'scheduled' }, 'scheduled'), el('option', { value: 'retrying' }, 'retrying'),
        el('option', { value: 'blocked' }, 'blocked'));
      const actions = el('div', { class: 'actions' },
        el('button', { type: 'button', id: 'revive-all', disabled: q.counts.dead === 0, onclick: () => act(
          `Revive all ${q.counts.dead} dead job(s) of ${name}?`, () => api('/api/queues/' + enc(name) + '/revive', { method: 'POST' })) },
        'Revive all dead'),
        el('span', { class: 'group' }, stateSelect, el('button', { type: 'button', class: 'danger', id: 'purge', onclick: () => act(
          `Delete every ${stateSelect.value} job of ${name}? This cannot be undone.`,
          () => api('/api/queues/' + enc(name) + '/purge', { method: 'POST', body: { state: stateSelect.value } })) }, 'Purge')),
        caps.pause ? el('button', { type: 'button', id: 'pause', onclick: () => act(
          (q.paused ? 'Resume' : 'Pause') + ` handing out jobs of ${name}?`,
          () => api('/api/queues/' + enc(name) + (q.paused ? '/resume' : '/pause'), { method: 'POST' })) },
        q.paused ? 'Resume' : 'Pause') : null,
        el('button', { type: 'button', class: 'danger', id: 'remove-queue',
          disabled: q.counts.blocked + q.counts.scheduled + q.counts.running + q.counts.retrying > 0,
          title: 'Only a queue without live jobs can be removed', onclick: () => act(
          `Remove queue ${name}, its finished jobs and its counters? This cannot be undone.`,
          () => api('/api/queues/' + enc(name) + '/remove', { method: 'POST' }),
          () => { location.hash = '#/'; }) }, 'Remove queue'));
      const windowSelect = el('select', { id: 'window', 'aria-label': 'window', onchange: (e) => {
        windowS = Number(e.target.value); location.hash = '#/queues/' + enc(name) + '?window=' + windowS;
      } }, WINDOWS.map(([label, s]) => el('option', { value: s, selected: s === windowS }, 'last ' + label)));
      const fair = t.fair_wait_bound_ms == null
        ? 'Nothing was served in this window.'
        : `${t.keys_due} key(s) have due jobs; at ${rate(t.served_per_s)} fair scheduling serves each within about ${duration(t.fair_wait_bound_ms)}.`;
      show(
        el('h1', {}, link('#/', 'Queues'), ' / ', name, ' ', el('span', { class: 'badge health ' + q.health.status }, q.health.status),
          q.paused ? el('span', { class: 'badge paused' }, 'paused') : null),
        el('section', { class: 'card queue', 'data-queue': name }, countsList(q.counts), actions),
        el('h2', {}, 'Tenants ', windowSelect),
        el('p', { class: 'muted', id: 'fairness' }, fair, ' A key is marked behind when it has had due jobs and no service for longer than that.',
          t.complete ? '' : ' Sampled: the store stopped reading at its budget, so numbers are a lower bound.'),
        t.tenants.length ? tenantsTable(t, name) : el('p', { class: 'muted' }, 'No keys with jobs waiting or served lately.'),
        el('h2', {}, 'Waits and run times'),
        latencyTable(detail.latency),
        el('section', { class: 'card' }, chart(q.series, 'jobs finished per second in ' + name)));
    },
  };
}

function jobsView(params) {
  const filters = {
    queue: params.get('queue') || '', state: params.get('state') || '', key: params.get('key') || '',
    no_key: params.get('no_key') === 'true', after: params.get('after') || '',
  };
  const query = () => {
    const q = new URLSearchParams();
    if (filters.queue) q.set('queue', filters.queue);
    if (filters.state) q.set('state', filters.state);
    if (filters.key) q.set('key', filters.key);
    if (filters.no_key) q.set('no_key', 'true');
    return q;
  };
  return {
    title: 'Jobs',
    async refresh() {
      const q = query();
      if (filters.after) q.set('after', filters.after);
      const page = await api('/api/jobs?' + q.toString());
      const queues = (overview && overview.queues.map((x) => x.name)) || [];
      const queueSelect = el('select', { name: 'queue', 'aria-label': 'queue' }, el('option', { value: '' }, 'any queue'),
        queues.map((n) => el('option', { value: n, selected: n === filters.queue }, n)));
      const stateSelect = el('select', { name: 'state', 'aria-label': 'state' }, el('option', { value: '' }, 'any state'),
        STATES.map((s) => el('option', { value: s, selected: s === filters.state }, s)));
      const keyInput = el('input', { name: 'key', placeholder: 'fairness key', value: filters.key, 'aria-label': 'fairness key' });
      const form = el('form', { class: 'filters', onsubmit: (e) => {
        e.preventDefault();
        filters.queue = queueSelect.value; filters.state = stateSelect.value; filters.key = keyInput.value.trim();
        filters.no_key = false; filters.after = '';
        location.hash = '#/jobs?' + query().toString();
      } }, queueSelect, stateSelect, keyInput, el('button', { type: 'submit' }, 'Filter'));
      const now = Date.now();
      const rows = page.jobs.map((j) => el('tr', { 'data-job': j.id },
        el('th', { scope: 'row' }, link('#/jobs/' + j.id, '#' + j.id)),
        el('td', {}, j.queue), el('td', {}, j.kind), el('td', {}, keyLabel(j.key)), el('td', {}, badge(j.status)),
        el('td', {}, j.attempts), el('td', {}, ago(j.enqueued_at, now)),
        el('td', {}, j.finished_at ? 'finished ' + ago(j.finished_at, now) : j.run_at ? (j.status === 'running' ? 'lease ends ' : 'due ') + ago(j.run_at, now) : '–'),
        el('td', { class: 'error' }, j.last_error || '')));
      const next = page.next_after == null ? null : el('button', { type: 'button', id: 'next', onclick: () => {
        const q2 = query(); q2.set('after', page.next_after); location.hash = '#/jobs?' + q2.toString();
      } }, 'Next page');
      show(el('h1', {}, 'Jobs'), form,
        page.jobs.length ? table(['id', 'queue', 'kind', 'key', 'state', 'attempts', 'enqueued', 'time', 'last error'], rows, { id: 'jobs' })
          : el('p', { class: 'muted' }, 'No jobs match.'),
        el('p', { class: 'pager' }, filters.after ? link('#/jobs?' + query().toString(), 'First page') : null, ' ', next));
    },
  };
}

function field(name, value) {
  return el('div', { class: 'field' }, el('dt', {}, name), el('dd', { 'data-field': name }, value == null ? '–' : value));
}

function jobView(id) {
  return {
    title: 'Job ' + id,
    async refresh() {
      let j;
      try {
        j = await api('/api/jobs/' + enc(id));
      } catch (e) {
        if (e.status === 404) { show(el('h1', {}, 'Job ' + id), el('p', { class: 'muted' }, 'No such job (it may have been pruned or purged).')); return; }
        throw e;
      }
      const now = Date.now();
      const waiting = ['scheduled', 'retrying', 'blocked'].includes(j.status);
      let payload = j.payload.text;
      if (payload != null && j.payload.json) {
        try { payload = JSON.stringify(JSON.parse(payload), null, 2); } catch (_) { /* shown as sent */ }
      }
      const actions = el('div', { class: 'actions' },
        j.status === 'dead' ? el('button', { type: 'button', id: 'revive', onclick: () => act(
          `Revive job ${j.id}? It runs again with a fresh retry budget.`, () => api('/api/jobs/' + j.id + '/revive', { method: 'POST' })) }, 'Revive') : null,
        waiting && session.capabilities.cancel ? el('button', { type: 'button', class: 'danger', id: 'cancel', onclick: () => act(
          `Cancel job ${j.id}? It is deleted and never runs.`, () => api('/api/jobs/' + j.id + '/cancel', { method: 'POST' }),
          () => { location.hash = '#/jobs?queue=' + enc(j.queue); }) }, 'Cancel') : null);
      show(
        el('h1', {}, link('#/jobs?queue=' + enc(j.queue), j.queue), ' / job ', String(j.id), ' ', badge(j.status)),
        actions,
        el('dl', { class: 'fields card' },
          field('kind', j.kind), field('key', keyLabel(j.key)), field('attempts', j.attempts),
          field('enqueued', clock(j.enqueued_at) + ' (' + ago(j.enqueued_at, now) + ')'),
          field(j.status === 'running' ? 'lease ends' : 'due', j.run_at == null ? null : clock(j.run_at)),
          field('finished', j.finished_at == null ? null : clock(j.finished_at)),
          field('dead reason', j.dead_reason), field('unique key', j.unique_key),
          field('depends on', j.depends_on == null ? null : link('#/jobs/' + j.depends_on, '#' + j.depends_on)),
          j.lease ? field('lease', `token ${j.lease.token}, attempt ${j.lease.attempt}, until ${clock(j.lease.deadline)}`) : null),
        el('h2', {}, 'Last error'),
        el('pre', { class: 'error', id: 'last-error' }, j.last_error || '(none)'),
        el('h2', {}, 'Payload ', el('span', { class: 'muted' }, `${j.payload.bytes} bytes`)),
        el('pre', { id: 'payload' }, payload != null ? payload : 'hex: ' + j.payload.hex),
        el('h2', {}, 'Metadata'),
        Object.keys(j.metadata).length
          ? table(['name', 'value'], Object.entries(j.metadata).map(([k, v]) => el('tr', {}, el('th', { scope: 'row' }, k), el('td', {}, v))))
          : el('p', { class: 'muted' }, '(none)'));
    },
  };
}

// ---- routing and live updates ------------------------------------------------------------

function show(...nodes) {
  const view = document.getElementById('view');
  const notices = [...view.querySelectorAll(':scope > .notice')];
  view.replaceChildren(...notices, ...nodes);
}

function route() {
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active',
    (a.dataset.nav === 'jobs') === (parts[0] === 'jobs')));
  if (parts[0] === 'queues' && parts[1] != null) return queueView(parts[1], params);
  if (parts[0] === 'jobs' && parts[1] != null) return jobView(parts[1]);
  if (parts[0] === 'jobs') return jobsView(params);
  return overviewView();
}

async function render() {
  current = route();
  document.title = current.title + ' · fairq';
  try {
    await current.refresh();
  } catch (e) {
    show(el('h1', {}, current.title), el('p', { class: 'notice bad', role: 'alert' }, 'Could not load: ' + e.message));
  }
}

let refreshing = false;
async function onTick(event) {
  overview = JSON.parse(event.data);
  document.getElementById('live').classList.add('on');
  if (!current || refreshing || document.querySelector('dialog[open]')) return;
  refreshing = true;
  try {
    if (current.title === 'Queues') await current.refresh(true);
    else if (!document.activeElement || !['INPUT', 'SELECT'].includes(document.activeElement.tagName)) await current.refresh();
  } catch (_) { /* the next tick tries again */ }
  refreshing = false;
}

function listen() {
  const live = document.getElementById('live');
  const source = new EventSource('/api/events');
  source.addEventListener('tick', onTick);
  source.addEventListener('problem', (e) => {
    live.classList.remove('on');
    live.title = 'live updates: the store did not answer: ' + JSON.parse(e.data).error;
  });
  source.addEventListener('open', () => { live.title = 'live updates: on'; });
  source.addEventListener('error', () => { live.classList.remove('on'); live.title = 'live updates: reconnecting'; });
}

function header() {
  document.getElementById('store').textContent = session.store;
  const who = document.getElementById('who');
  if (session.signed_in && session.csrf) {
    who.replaceChildren(el('button', { type: 'button', class: 'link', id: 'sign-out', onclick: async () => {
      await fetch('/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': session.csrf } });
      location.reload();
    } }, 'Sign out'));
  } else if (!session.signed_in) {
    who.replaceChildren(link('/login', 'Sign in'));
  }
}

async function start() {
  try {
    session = await api('/api/session');
  } catch (e) {
    show(el('p', { class: 'notice bad', role: 'alert' }, 'Could not reach the dashboard: ' + e.message));
    return;
  }
  header();
  window.addEventListener('hashchange', render);
  await render();
  listen();
}

document.addEventListener('DOMContentLoaded', start);
