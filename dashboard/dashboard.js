// The estuary service's dashboard: polls GET /v1/nodes, /v1/jobs, /v1/stats and /v1/queues with a
// bearer token and draws the node grid (a canvas, grouped by ASW or RDMA-POD, each node coloured
// by its GPU use), the allocation chart (Chart.js), the waiting work by priority, the tenant queues
// (the tree of GET /v1/queues with each queue's GPUs) and the jobs table. GET /v1/queues is asked
// on its own terms: its failure or a 403 shows in its card and leaves the rest of the page as is.
// Every text taken from the API goes into the page as text (textContent, Text nodes, canvas
// fillText), never as markup.
(() => {
  'use strict';

  const POLL_MS = 3000;
  const MAX_JOB_ROWS = 500;
  const TOKEN_KEY = 'estuary.dashboard.token';
  const STATES = ['pending', 'running', 'succeeded', 'failed', 'cancelled'];
  const HP_PRIORITY = 700;

  const $ = (id) => document.getElementById(id);
  const fmtInt = new Intl.NumberFormat('en-US');
  const collator = new Intl.Collator('en', { numeric: true });

  let token = null;
  let timer = null;
  let polls = 0;
  let inFlight = false;
  // Endpoints this token may not read (403): not asked again until the token changes.
  const forbidden = new Set();
  // The last answers, for redrawing on a resize or a changed control.
  let lastNodes = null;
  let lastJobs = null;
  // GET /v1/queues: null when this token may not read it (403), else {queues, sharing, at} of the
  // last answer (null before one) and `error`, the last poll's failure ('' when it answered).
  let lastQueues = { queues: null, sharing: null, at: 0, error: '' };

  // ---------------------------------------------------------------------------------------------
  // Small helpers.

  class AuthError extends Error {}

  // An element with a class and text children (strings become Text nodes).
  function el(tag, className, ...children) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    for (const c of children) e.append(c);
    return e;
  }

  function pad2(n) {
    return String(n).padStart(2, '0');
  }

  function fmtClock(ms) {
    const d = new Date(ms);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function fmtWhen(ms) {
    if (!Number.isFinite(ms) || ms <= 0) return '';
    const d = new Date(ms);
    const today = new Date();
    const sameDay = d.toDateString() === today.toDateString();
    const date = `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;
    return sameDay ? fmtClock(ms) : `${date} ${fmtClock(ms)}`;
  }

  function fmtGpus(x) {
    return Number.isInteger(x) ? fmtInt.format(x) : x.toFixed(1);
  }

  function num(x) {
    return typeof x === 'number' && Number.isFinite(x) ? x : 0;
  }

  function str(x) {
    return typeof x === 'string' ? x : x === undefined || x === null ? '' : String(x);
  }

  // GPUs one replica of a job takes (a shared GPU's share as a fraction).
  function gpusPerReplica(job) {
    const milli = num(job.gpu_milli);
    if (milli > 0 && milli < 1000) return milli / 1000;
    return num(job.gpus);
  }

  function setStatus(text, bad) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('bad', Boolean(bad));
  }

  // ---------------------------------------------------------------------------------------------
  // The token: from the URL fragment (#token=...; then kept in sessionStorage and removed from the
  // address bar), from sessionStorage, or from the form.

  function takeTokenFromFragment() {
    const hash = window.location.hash.replace(/^#/, '');
    if (!hash) return;
    const kept = [];
    let found = null;
    for (const part of hash.split('&')) {
      if (part.startsWith('token=')) {
        try {
          found = decodeURIComponent(part.slice('token='.length));
        } catch (e) {
          found = part.slice('token='.length);
        }
      } else if (part) {
        kept.push(part);
      }
    }
    if (found === null) return;
    if (found) {
      try {
        sessionStorage.setItem(TOKEN_KEY, found);
      } catch (e) {
        // Storage unavailable: the token lives in memory for this page only.
      }
      token = found;
    }
    const rest = kept.length ? `#${kept.join('&')}` : '';
    history.replaceState(null, '', window.location.pathname + window.location.search + rest);
  }

  function storedToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      return null;
    }
  }

  function showLogin(message) {
    clearTimeout(timer);
    timer = null;
    $('main').hidden = true;
    $('forget').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('summary').textContent = '';
    setStatus('');
    $('token-input').focus();
  }

  function start(newToken) {
    token = newToken;
    forbidden.clear();
    lastQueues = { queues: null, sharing: null, at: 0, error: '' };
    tenantQueuesSignature = '';
    $('login').hidden = true;
    $('main').hidden = false;
    $('forget').hidden = false;
    setStatus('loading…');
    poll();
  }

  function forgetToken(message) {
    token = null;
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      // nothing stored
    }
    showLogin(message);
  }

  // ---------------------------------------------------------------------------------------------
  // Polling.

  async function getJson(path) {
    if (forbidden.has(path)) return null;
    const res = await fetch(path, {
      headers: { Authorization: `Bearer ${token}` },
      cache: 'no-store',
      credentials: 'omit',
    });
    if (res.status === 401) throw new AuthError('the token was not accepted (401)');
    if (res.status === 403) {
      forbidden.add(path);
      return null;
    }
    if (!res.ok) {
      let why = '';
      try {
        why = str((await res.json()).error);
      } catch (e) {
        why = res.statusText;
      }
      throw new Error(`${path}: ${res.status} ${why}`);
    }
    return res.json();
  }

  async function poll() {
    clearTimeout(timer);
    timer = null;
    if (!token || inFlight) return;
    if (document.hidden) {
      timer = setTimeout(poll, POLL_MS);
      return;
    }
    inFlight = true;
    const asked = token;
    try {
      // The queues fail on their own: any error but a refused token becomes {error}.
      const queuesAnswer = getJson('/v1/queues').then(
        (answer) => ({ answer }),
        (e) => {
          if (e instanceof AuthError) throw e;
          return { error: e };
        },
      );
      const [nodes, jobs, stats, queues] = await Promise.all([
        getJson('/v1/nodes'),
        getJson('/v1/jobs'),
        getJson('/v1/stats'),
        queuesAnswer,
      ]);
      if (asked === token) {
        lastNodes = nodes ? (Array.isArray(nodes.nodes) ? nodes.nodes : []) : null;
        lastJobs = jobs ? (Array.isArray(jobs.jobs) ? jobs.jobs : []) : null;
        takeQueues(queues);
        renderNodes();
        renderJobs();
        renderByPriority();
        renderTenantQueues();
        renderStats(stats ? (Array.isArray(stats.samples) ? stats.samples : []) : null);
        renderSummary();
        polls += 1;
        document.documentElement.dataset.polls = String(polls);
        setStatus(`updated ${fmtClock(Date.now())}`);
      }
    } catch (e) {
      if (asked === token) {
        if (e instanceof AuthError) {
          inFlight = false;
          forgetToken(`${e.message}: give another token.`);
          return;
        }
        console.error('dashboard:', e);
        setStatus(`cannot load: ${e.message} (retrying)`, true);
      }
    } finally {
      inFlight = false;
    }
    // A token given while this poll was in flight is polled at once.
    if (token && timer === null) timer = setTimeout(poll, asked === token ? POLL_MS : 0);
  }

  // ---------------------------------------------------------------------------------------------
  // The header's one-line summary.

  function renderSummary() {
    const parts = [];
    if (lastNodes) {
      let gpus = 0;
      let used = 0;
      let failed = 0;
      for (const n of lastNodes) {
        if (n.state === 'failed') {
          failed += 1;
          continue;
        }
        gpus += num(n.gpus);
        used += num(n.gpu_milli_used) / 1000;
      }
      parts.push(`${fmtInt.format(lastNodes.length)} nodes${failed ? ` (${fmtInt.format(failed)} failed)` : ''}`);
      const pct = gpus > 0 ? ((100 * used) / gpus).toFixed(1) : '0.0';
      parts.push(`${fmtGpus(used)} of ${fmtInt.format(gpus)} GPUs in use (${pct}%)`);
    }
    if (lastJobs) {
      const count = (s) => lastJobs.reduce((a, j) => a + (j.state === s ? 1 : 0), 0);
      parts.push(`${fmtInt.format(count('pending'))} pending`);
      parts.push(`${fmtInt.format(count('running'))} running`);
    }
    $('summary').textContent = parts.join(' · ');
  }

  // ---------------------------------------------------------------------------------------------
  // The node grid: one canvas; groups (ASW: domains.data[2], RDMA-POD: domains.param[0]) laid
  // out left to right, each a box of cells. Hovering shows a node's (or a group's) details.

  const USE_COLORS = ['#dfe4ea', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c', '#08306b'];
  const FAILED_COLOR = '#d64045';
  const NO_GPU_COLOR = '#ffffff';
  const CORDON_COLOR = '#e8a317';
  const grid = { by: 'asw', layout: null, width: 0 };

  function useFraction(n) {
    const cap = num(n.gpus) * 1000;
    return cap > 0 ? Math.min(1, Math.max(0, num(n.gpu_milli_used) / cap)) : 0;
  }

  // Index into the colours: failed -1, no GPUs -2, idle 0, else 1..7 by the share in use.
  function colorIndex(n) {
    if (n.state === 'failed') return -1;
    if (num(n.gpus) <= 0) return -2;
    const f = useFraction(n);
    if (f <= 0) return 0;
    return Math.min(USE_COLORS.length - 1, 1 + Math.floor(f * (USE_COLORS.length - 1) - 1e-9));
  }

  function groupOf(n, by) {
    const d = n && typeof n.domains === 'object' && n.domains ? n.domains : {};
    const list = by === 'pod' ? d.param : d.data;
    const name = Array.isArray(list) ? list[by === 'pod' ? 0 : 2] : undefined;
    return typeof name === 'string' && name ? name : '(none)';
  }

  function buildLegend() {
    const swatch = (color, title, outline) => {
      const sw = el('span', outline ? 'swatch outline' : 'swatch');
      sw.style.background = color;
      if (title) sw.title = title;
      return sw;
    };
    // The steps of GPU use: step k holds (k-1)/7 < share <= k/7.
    const steps = USE_COLORS.slice(1).map((c, i) => {
      const lo = Math.round((100 * i) / (USE_COLORS.length - 1));
      const hi = Math.round((100 * (i + 1)) / (USE_COLORS.length - 1));
      return swatch(c, `${lo}% < GPUs in use ≤ ${hi}%`);
    });
    $('legend').replaceChildren(
      el('span', 'item', swatch(USE_COLORS[0]), 'idle'),
      el('span', 'item', 'GPUs in use: few', ...steps, 'all'),
      el('span', 'item', swatch(FAILED_COLOR), 'failed'),
      el('span', 'item', swatch(USE_COLORS[0], '', true), 'cordoned, evacuating or drained'),
    );
  }

  function layoutGrid(nodes, width) {
    const count = nodes.length;
    const pitch = count <= 512 ? 18 : count <= 2000 ? 14 : count <= 6000 ? 10 : count <= 12000 ? 8 : 6;
    const cellGap = pitch >= 18 ? 3 : pitch >= 10 ? 2 : 1;
    const pad = 5;
    const labelH = 14;
    const gap = 8;
    const byName = new Map();
    for (const n of nodes) {
      const key = groupOf(n, grid.by);
      let g = byName.get(key);
      if (!g) {
        g = { name: key, nodes: [], used: 0, gpus: 0 };
        byName.set(key, g);
      }
      g.nodes.push(n);
      if (n.state !== 'failed') {
        g.gpus += num(n.gpus);
        g.used += num(n.gpu_milli_used) / 1000;
      }
    }
    const groups = [...byName.values()].sort((a, b) => collator.compare(a.name, b.name));
    const inner = Math.max(pitch, width - 2 * gap - 2 * pad);
    let x = gap;
    let y = gap;
    let rowH = 0;
    for (const g of groups) {
      g.nodes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const len = g.nodes.length;
      let cols = len <= 64 ? Math.min(8, len) : Math.ceil(Math.sqrt(2 * len));
      cols = Math.max(1, Math.min(cols, Math.floor(inner / pitch)));
      const rows = Math.ceil(len / cols);
      g.cols = cols;
      g.w = Math.max(cols * pitch, 48) + 2 * pad;
      g.h = labelH + rows * pitch + 2 * pad;
      if (x > gap && x + g.w > width - gap) {
        x = gap;
        y += rowH + gap;
        rowH = 0;
      }
      g.x = x;
      g.y = y;
      g.cellX = x + pad;
      g.cellY = y + pad + labelH;
      x += g.w + gap;
      rowH = Math.max(rowH, g.h);
    }
    return { groups, pitch, cellGap, pad, height: groups.length ? y + rowH + gap : 0 };
  }

  // A label that fits `width`: the name, or its end after an ellipsis.
  function fitLabel(ctx, name, width) {
    if (ctx.measureText(name).width <= width) return name;
    let lo = 0;
    let hi = name.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ctx.measureText(`…${name.slice(mid)}`).width <= width) hi = mid;
      else lo = mid + 1;
    }
    return `…${name.slice(lo)}`;
  }

  function renderNodes() {
    const canvas = $('grid');
    const note = $('nodes-note');
    if (lastNodes === null) {
      note.hidden = false;
      note.textContent = 'Nodes need an admin token.';
      canvas.hidden = true;
      $('node-count').textContent = '';
      grid.layout = null;
      return;
    }
    canvas.hidden = false;
    note.hidden = lastNodes.length > 0;
    note.textContent = lastNodes.length ? '' : 'No nodes registered yet.';

    const width = Math.max(200, $('grid-wrap').clientWidth);
    const layout = layoutGrid(lastNodes, width);
    grid.layout = layout;
    grid.width = width;
    const height = Math.max(1, layout.height);
    const dpr = window.devicePixelRatio || 1;
    const pw = Math.round(width * dpr);
    const ph = Math.round(height * dpr);
    if (canvas.width !== pw || canvas.height !== ph) {
      canvas.width = pw;
      canvas.height = ph;
      canvas.style.height = `${height}px`;
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);

    // Group boxes and labels.
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'top';
    for (const g of layout.groups) {
      ctx.fillStyle = '#f1f3f6';
      ctx.fillRect(g.x, g.y, g.w, g.h);
      ctx.fillStyle = '#475467';
      ctx.fillText(fitLabel(ctx, g.name, g.w - 2 * layout.pad), g.x + layout.pad, g.y + layout.pad);
    }

    // Cells, batched by colour: one fillStyle per colour.
    const size = layout.pitch - layout.cellGap;
    const buckets = new Map();
    const cordoned = [];
    let drawn = 0;
    for (const g of layout.groups) {
      for (let i = 0; i < g.nodes.length; i += 1) {
        const n = g.nodes[i];
        const cx = g.cellX + (i % g.cols) * layout.pitch;
        const cy = g.cellY + Math.floor(i / g.cols) * layout.pitch;
        const c = colorIndex(n);
        let b = buckets.get(c);
        if (!b) {
          b = [];
          buckets.set(c, b);
        }
        b.push(cx, cy);
        if (n.state === 'cordoned' || n.state === 'evacuating' || n.state === 'drained') cordoned.push(cx, cy);
        drawn += 1;
      }
    }
    for (const [c, xy] of buckets) {
      ctx.fillStyle = c === -1 ? FAILED_COLOR : c === -2 ? NO_GPU_COLOR : USE_COLORS[c];
      for (let k = 0; k < xy.length; k += 2) ctx.fillRect(xy[k], xy[k + 1], size, size);
      if (c === -2) {
        ctx.strokeStyle = '#98a2b3';
        ctx.lineWidth = 1;
        for (let k = 0; k < xy.length; k += 2) ctx.strokeRect(xy[k] + 0.5, xy[k + 1] + 0.5, size - 1, size - 1);
      }
    }
    if (cordoned.length) {
      ctx.strokeStyle = CORDON_COLOR;
      ctx.lineWidth = size >= 8 ? 2 : 1;
      const inset = ctx.lineWidth / 2;
      for (let k = 0; k < cordoned.length; k += 2) {
        ctx.strokeRect(cordoned[k] + inset, cordoned[k + 1] + inset, size - 2 * inset, size - 2 * inset);
      }
    }

    const kind = grid.by === 'pod' ? 'RDMA-POD' : 'ASW';
    const groupsText = `${fmtInt.format(layout.groups.length)} ${kind}${layout.groups.length === 1 ? '' : 's'}`;
    $('node-count').textContent = `${fmtInt.format(lastNodes.length)} nodes in ${groupsText}`;
    canvas.dataset.cells = String(drawn);
    canvas.dataset.groups = String(layout.groups.length);
    canvas.setAttribute('aria-label', `${lastNodes.length} nodes in ${groupsText}, coloured by GPU use`);
  }

  function hitTest(px, py) {
    const layout = grid.layout;
    if (!layout) return null;
    for (const g of layout.groups) {
      if (px < g.x || py < g.y || px >= g.x + g.w || py >= g.y + g.h) continue;
      const col = Math.floor((px - g.cellX) / layout.pitch);
      const row = Math.floor((py - g.cellY) / layout.pitch);
      if (px >= g.cellX && py >= g.cellY && col < g.cols) {
        const i = row * g.cols + col;
        if (i < g.nodes.length) return { group: g, node: g.nodes[i] };
      }
      return { group: g, node: null };
    }
    return null;
  }

  function describe(hit) {
    const g = hit.group;
    const kind = grid.by === 'pod' ? 'RDMA-POD' : 'ASW';
    const groupPct = g.gpus > 0 ? ((100 * g.used) / g.gpus).toFixed(0) : '0';
    const groupLine = `${kind} ${g.name}: ${g.nodes.length} nodes, ${fmtGpus(g.used)}/${fmtInt.format(g.gpus)} GPUs in use (${groupPct}%)`;
    if (!hit.node) return groupLine;
    const n = hit.node;
    const used = num(n.gpu_milli_used) / 1000;
    const model = str(n.gpu_model);
    return [
      str(n.name),
      `${str(n.state)} · ${fmtGpus(used)}/${fmtInt.format(num(n.gpus))} GPUs in use${model ? ` (${model})` : ''}`,
      `ASW ${groupOf(n, 'asw')} · RDMA-POD ${groupOf(n, 'pod')}`,
      `agent ${str(n.agent)}`,
    ].join('\n');
  }

  function onGridMove(ev) {
    const tip = $('tooltip');
    const canvas = $('grid');
    const r = canvas.getBoundingClientRect();
    const px = ev.clientX - r.left;
    const py = ev.clientY - r.top;
    const hit = hitTest(px, py);
    if (!hit) {
      tip.hidden = true;
      return;
    }
    tip.textContent = describe(hit);
    tip.hidden = false;
    // Fixed to the viewport (not clipped by the grid's scroll box), beside the pointer.
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    let left = ev.clientX + 14;
    let top = ev.clientY + 14;
    if (left + w > window.innerWidth - 4) left = Math.max(4, ev.clientX - w - 14);
    if (top + h > window.innerHeight - 4) top = Math.max(4, ev.clientY - h - 14);
    tip.style.left = `${left}px`;
    tip.style.top = `${top}px`;
  }

  // ---------------------------------------------------------------------------------------------
  // Jobs: most recent first, at most MAX_JOB_ROWS rows.

  let jobsSignature = '';

  function stateClass(s) {
    return STATES.includes(s) ? s : 'other';
  }

  function renderJobs() {
    const body = $('jobs').tBodies[0];
    if (lastJobs === null) {
      body.replaceChildren();
      $('jobs-count').textContent = 'jobs need a tenant or admin token';
      jobsSignature = '';
      return;
    }
    const counts = new Map();
    for (const j of lastJobs) counts.set(j.state, (counts.get(j.state) || 0) + 1);
    for (const opt of $('job-state').options) {
      const label = opt.value || 'all';
      const n = opt.value ? counts.get(opt.value) || 0 : lastJobs.length;
      opt.textContent = `${label} (${fmtInt.format(n)})`;
    }
    const filter = $('job-state').value;
    const chosen = filter ? lastJobs.filter((j) => j.state === filter) : lastJobs.slice();
    chosen.sort((a, b) => num(b.submitted_ms) - num(a.submitted_ms) || Number(b.id) - Number(a.id));
    const shown = chosen.slice(0, MAX_JOB_ROWS);
    $('jobs-count').textContent =
      chosen.length > shown.length
        ? `${fmtInt.format(shown.length)} most recent of ${fmtInt.format(chosen.length)}`
        : `${fmtInt.format(chosen.length)} job${chosen.length === 1 ? '' : 's'}, most recent first`;

    // The queue column shows when some job has a queue (the service has queues).
    $('jobs').classList.toggle('no-queue', !lastJobs.some((j) => str(j.queue) !== ''));
    const rows = shown.map((j) => {
      const rep = j.replicas && typeof j.replicas === 'object' ? j.replicas : {};
      const min = num(rep.min);
      const max = num(rep.max);
      return [
        str(j.id),
        str(j.name),
        str(j.tenant),
        str(j.queue),
        str(j.state),
        num(j.priority),
        `${num(j.running_replicas)} of ${min === max ? min : `${min}–${max}`}` +
          (num(j.standby_replicas) > 0 ? `, ${num(j.standby_replicas)} in standby` : '') +
          (num(j.migrating_replicas) > 0 ? `, ${num(j.migrating_replicas)} migrating` : ''),
        fmtGpus(gpusPerReplica(j)),
        num(j.submitted_ms),
        str(j.reason),
      ];
    });
    const signature = JSON.stringify(rows);
    if (signature === jobsSignature) return;
    jobsSignature = signature;

    const frag = document.createDocumentFragment();
    for (const [id, name, tenant, queue, state, priority, replicas, gpus, submitted, reason] of rows) {
      const tr = el('tr', `state-${stateClass(state)}`);
      const prio = el('td', null, String(priority));
      if (priority >= HP_PRIORITY) prio.append(el('span', 'hp', 'HP'));
      const when = el('td', null, fmtWhen(submitted));
      if (submitted > 0) when.title = new Date(submitted).toISOString();
      tr.append(
        el('td', null, id),
        el('td', 'name', name),
        el('td', null, tenant),
        el('td', 'col-queue', queue),
        el('td', null, el('span', `state ${stateClass(state)}`, state)),
        prio,
        el('td', null, replicas),
        el('td', null, gpus),
        when,
        el('td', 'reason', state === 'running' || state === 'succeeded' ? '' : reason),
      );
      frag.append(tr);
    }
    body.replaceChildren(frag);
  }

  // ---------------------------------------------------------------------------------------------
  // Waiting work by priority (every queue's jobs together): pending jobs (and the GPUs their min
  // replicas need) and running jobs.

  function renderByPriority() {
    const body = $('by-priority').tBodies[0];
    const empty = $('by-priority-empty');
    if (lastJobs === null) {
      body.replaceChildren();
      empty.hidden = false;
      empty.textContent = 'Jobs need a tenant or admin token.';
      return;
    }
    const byPriority = new Map();
    for (const j of lastJobs) {
      if (j.state !== 'pending' && j.state !== 'running') continue;
      const p = num(j.priority);
      let q = byPriority.get(p);
      if (!q) {
        q = { pending: 0, pendingGpus: 0, running: 0 };
        byPriority.set(p, q);
      }
      if (j.state === 'pending') {
        q.pending += 1;
        const rep = j.replicas && typeof j.replicas === 'object' ? j.replicas : {};
        q.pendingGpus += Math.max(1, num(rep.min)) * gpusPerReplica(j);
      } else {
        q.running += 1;
      }
    }
    const prios = [...byPriority.keys()].sort((a, b) => b - a);
    const most = Math.max(1, ...prios.map((p) => byPriority.get(p).pending));
    const frag = document.createDocumentFragment();
    for (const p of prios) {
      const q = byPriority.get(p);
      const prio = el('td', null, String(p));
      if (p >= HP_PRIORITY) prio.append(el('span', 'hp', 'HP'));
      const bar = el('span', 'bar');
      bar.style.width = `${(100 * q.pending) / most}%`;
      bar.hidden = q.pending === 0;
      const barLine = el('div', 'bar-line', bar, fmtInt.format(q.pending));
      tr(frag, prio, el('td', 'bar-cell', barLine), el('td', null, fmtGpus(q.pendingGpus)), el('td', null, fmtInt.format(q.running)));
    }
    body.replaceChildren(frag);
    empty.hidden = prios.length > 0;
    empty.textContent = 'No pending or running jobs.';
  }

  function tr(parent, ...cells) {
    const row = document.createElement('tr');
    row.append(...cells);
    parent.append(row);
  }

  // ---------------------------------------------------------------------------------------------
  // Tenant queues (GET /v1/queues): the tree, each queue under its parent, children in the
  // configuration's order (a parent may be listed after its children); per queue its GPUs (held,
  // guaranteed, fair share, borrowed, limit, lent, pending) and jobs, and a bar scaled to the
  // queue's own figures: held filled (the part above the guarantee, borrowed, highlighted), a mark
  // at the guarantee and one at the fair share. Rows are redrawn only when an answer changes.

  const fmtFigure = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });
  let tenantQueuesSignature = '';

  // Keeps one poll's outcome of GET /v1/queues ({answer} or {error}) in lastQueues; a failure
  // keeps the last answer beside the error.
  function takeQueues(outcome) {
    if (!outcome.error && outcome.answer === null) {
      lastQueues = null;
      return;
    }
    const kept = lastQueues || { queues: null, sharing: null, at: 0 };
    const answer = outcome.answer;
    if (outcome.error || !answer || !Array.isArray(answer.queues)) {
      const why = outcome.error ? str(outcome.error.message || outcome.error) : '/v1/queues: not a list of queues';
      lastQueues = { ...kept, error: why };
      return;
    }
    const sharing = answer.sharing && typeof answer.sharing === 'object' ? answer.sharing : null;
    lastQueues = { queues: answer.queues, sharing, at: Date.now(), error: '' };
  }

  // The queues in tree order: [{q, depth, leaf, path (the ancestors' names, top first)}]. A queue
  // whose parent is not listed is shown at the top level; a cycle (which the service refuses) is
  // cut where it closes.
  function queueTree(list) {
    const nodes = new Map();
    for (const q of list) {
      const name = q && typeof q === 'object' ? str(q.name) : '';
      if (name && !nodes.has(name)) nodes.set(name, { q, name, children: [] });
    }
    const roots = [];
    for (const n of nodes.values()) {
      const parent = nodes.get(str(n.q.parent));
      if (parent && parent !== n) parent.children.push(n);
      else roots.push(n);
    }
    const out = [];
    const seen = new Set();
    const walk = (starts) => {
      const stack = starts.map((n) => ({ n, depth: 0, path: [] })).reverse();
      while (stack.length) {
        const { n, depth, path } = stack.pop();
        if (seen.has(n)) continue;
        seen.add(n);
        out.push({ q: n.q, depth, leaf: n.children.length === 0, path });
        const below = [...path, n.name];
        for (let k = n.children.length - 1; k >= 0; k -= 1) stack.push({ n: n.children[k], depth: depth + 1, path: below });
      }
    };
    walk(roots);
    walk([...nodes.values()].filter((n) => !seen.has(n)));
    return out;
  }

  function yesNo(b) {
    return b === false ? 'no' : 'yes';
  }

  function sharingText(sh) {
    if (!sh) return '';
    const parts = [sh.borrow === false ? 'no borrowing' : 'borrowing'];
    parts.push(sh.reclaim === false ? 'no reclaim' : `reclaim to ${str(sh.reclaim_to) || 'guarantee'}`);
    parts.push(sh.weights === false ? 'unweighted' : 'weighted');
    if (num(sh.usage_half_life_s) > 0) parts.push(`usage half-life ${fmtInt.format(num(sh.usage_half_life_s))} s`);
    parts.push(`cooldown ${fmtInt.format(num(sh.cooldown_s))} s`);
    return `sharing: ${parts.join(', ')}`;
  }

  // One row's cells as data (the signature) from a tree entry.
  function queueRowData(entry) {
    const q = entry.q;
    const g = q.gpus && typeof q.gpus === 'object' ? q.gpus : {};
    const jobs = q.jobs && typeof q.jobs === 'object' ? q.jobs : {};
    return {
      name: str(q.name),
      depth: entry.depth,
      leaf: entry.leaf,
      path: entry.path,
      held: num(g.held),
      guaranteed: num(g.guaranteed),
      fair: num(g.fair_share),
      entitled: num(g.entitled),
      borrowed: num(g.borrowed),
      limit: typeof g.limit === 'number' && Number.isFinite(g.limit) ? g.limit : null,
      lent: num(g.lent),
      pending: num(g.pending),
      waiting: num(jobs.waiting),
      running: num(jobs.running),
      tenants: Array.isArray(q.tenants) ? q.tenants.map(str) : [],
      weight: num(q.weight),
      maxPriority: num(q.max_priority),
      reclaim: q.reclaim,
      reclaimable: q.reclaimable,
    };
  }

  function queueBar(d) {
    const scale = Math.max(d.held, d.guaranteed, d.fair);
    const pct = (x) => `${scale > 0 ? Math.min(100, Math.max(0, (100 * x) / scale)) : 0}%`;
    const borrowed = Math.min(d.held, Math.max(0, d.borrowed));
    const bar = el('div', 'qbar');
    const within = el('span', 'fill held');
    within.style.width = pct(d.held - borrowed);
    bar.append(within);
    if (borrowed > 0) {
      const over = el('span', 'fill borrowed');
      over.style.left = pct(d.held - borrowed);
      over.style.width = pct(borrowed);
      bar.append(over);
    }
    for (const [cls, x] of [['guarantee', d.guaranteed], ['fair', d.fair]]) {
      if (x <= 0) continue;
      const mark = el('span', `mark ${cls}`);
      mark.style.left = pct(x);
      bar.append(mark);
    }
    bar.setAttribute('role', 'img');
    bar.setAttribute(
      'aria-label',
      `${fmtFigure.format(d.held)} GPUs held${borrowed > 0 ? ` (${fmtFigure.format(borrowed)} borrowed)` : ''}, ` +
        `guarantee ${fmtFigure.format(d.guaranteed)}, fair share ${fmtFigure.format(d.fair)}`,
    );
    return bar;
  }

  function queueRow(d) {
    const row = el('tr', d.leaf ? 'leaf' : 'inner');
    row.dataset.queue = d.name;
    row.dataset.depth = String(d.depth);
    const head = el('th', `queue-name${d.leaf ? ' leaf' : ''}`);
    head.scope = 'row';
    head.style.paddingLeft = `${8 + 18 * d.depth}px`;
    if (d.depth > 0) {
      const branch = el('span', 'branch', '└');
      branch.setAttribute('aria-hidden', 'true');
      head.append(branch);
    }
    head.append(el('span', 'qname', d.name));
    if (d.path.length) head.setAttribute('aria-label', `${d.name}, under ${d.path.join(' / ')}`);
    head.title =
      `${[...d.path, d.name].join(' / ')}\nweight ${fmtFigure.format(d.weight)} · max priority ${d.maxPriority}` +
      `\nentitled to ${fmtFigure.format(d.entitled)} GPUs · reclaims ${yesNo(d.reclaim)} · reclaimable ${yesNo(d.reclaimable)}`;
    const n = (x, cls) => el('td', cls ? `num ${cls}` : 'num', fmtFigure.format(x));
    row.append(
      head,
      el('td', 'bar-cell', queueBar(d)),
      n(d.held),
      n(d.guaranteed),
      n(d.fair),
      n(d.borrowed, d.borrowed > 0 ? 'borrowed-gpus' : ''),
      el('td', 'num', d.limit === null ? 'none' : fmtFigure.format(d.limit)),
      n(d.lent),
      n(d.pending),
      n(d.waiting),
      n(d.running),
      el('td', 'tenants', d.tenants.join(', ')),
    );
    return row;
  }

  function renderTenantQueues() {
    const note = $('tenant-queues-note');
    const wrap = $('tenant-queues-wrap');
    const body = $('tenant-queues').tBodies[0];
    const count = $('tenant-queues-count');
    const showNote = (text) => {
      note.textContent = text;
      note.hidden = !text;
    };
    if (lastQueues === null) {
      body.replaceChildren();
      tenantQueuesSignature = '';
      wrap.hidden = true;
      count.textContent = '';
      $('tenant-queues-sharing').textContent = '';
      showNote('Tenant queues need a tenant or admin token.');
      return;
    }
    const { queues, sharing, at, error } = lastQueues;
    if (queues === null) {
      wrap.hidden = true;
      count.textContent = '';
      showNote(error ? `Cannot load the queues: ${error}` : '');
      return;
    }
    $('tenant-queues-sharing').textContent = queues.length ? sharingText(sharing) : '';
    if (queues.length === 0) {
      body.replaceChildren();
      tenantQueuesSignature = '';
      wrap.hidden = true;
      count.textContent = '';
      showNote(error ? `No queues configured (as of ${fmtClock(at)}; cannot load them now: ${error}).` : 'No queues configured.');
      return;
    }
    wrap.hidden = false;
    count.textContent = `${fmtInt.format(queues.length)} queue${queues.length === 1 ? '' : 's'}${error ? `, as of ${fmtClock(at)}` : ''}`;
    showNote(error ? `Cannot load the queues now: ${error} (showing the answer of ${fmtClock(at)}).` : '');
    const rows = queueTree(queues).map(queueRowData);
    const signature = JSON.stringify(rows);
    if (signature === tenantQueuesSignature) return;
    tenantQueuesSignature = signature;
    const frag = document.createDocumentFragment();
    for (const d of rows) frag.append(queueRow(d));
    body.replaceChildren(frag);
  }

  // ---------------------------------------------------------------------------------------------
  // Allocation over time (GET /v1/stats): GPUs allocated as a share of the ready nodes' GPUs, and
  // the pending and running jobs.

  let allocChart = null;

  function renderStats(samples) {
    const note = $('alloc-note');
    if (samples === null) {
      note.hidden = false;
      note.textContent = 'The allocation history needs an admin token.';
      return;
    }
    note.hidden = samples.length > 0;
    note.textContent = samples.length ? '' : 'No samples yet (one every 5 s).';
    if (typeof Chart === 'undefined') {
      note.hidden = false;
      note.textContent = 'The charting library did not load.';
      return;
    }
    const alloc = [];
    const pending = [];
    const running = [];
    for (const s of samples) {
      const t = num(s.t_ms);
      const gpus = num(s.gpus);
      alloc.push({ x: t, y: gpus > 0 ? (100 * num(s.gpus_allocated)) / gpus : 0 });
      pending.push({ x: t, y: num(s.pending) });
      running.push({ x: t, y: num(s.running) });
    }
    const pointRadius = samples.length <= 40 ? 2 : 0;
    if (!allocChart) {
      allocChart = new Chart($('alloc-chart'), {
        type: 'line',
        data: {
          datasets: [
            {
              label: 'GPUs allocated (%)',
              data: alloc,
              yAxisID: 'y',
              borderColor: '#2171b5',
              backgroundColor: 'rgba(33, 113, 181, 0.15)',
              fill: 'origin',
              borderWidth: 2,
            },
            { label: 'pending jobs', data: pending, yAxisID: 'jobs', borderColor: '#b54708', backgroundColor: '#b54708', borderWidth: 2 },
            { label: 'running jobs', data: running, yAxisID: 'jobs', borderColor: '#1a7f37', backgroundColor: '#1a7f37', borderWidth: 2 },
          ],
        },
        options: {
          animation: false,
          responsive: true,
          maintainAspectRatio: false,
          interaction: { mode: 'index', intersect: false },
          elements: { point: { radius: pointRadius }, line: { tension: 0 } },
          scales: {
            x: {
              type: 'linear',
              ticks: { callback: (v) => fmtClock(v), maxTicksLimit: 8, maxRotation: 0 },
            },
            y: {
              min: 0,
              max: 100,
              title: { display: true, text: 'GPUs allocated (%)' },
            },
            jobs: {
              position: 'right',
              beginAtZero: true,
              suggestedMax: 4,
              ticks: { precision: 0 },
              grid: { drawOnChartArea: false },
              title: { display: true, text: 'jobs' },
            },
          },
          plugins: {
            legend: { position: 'bottom' },
            tooltip: {
              callbacks: {
                title: (items) => (items.length ? fmtClock(items[0].parsed.x) : ''),
              },
            },
          },
        },
      });
      return;
    }
    allocChart.data.datasets[0].data = alloc;
    allocChart.data.datasets[1].data = pending;
    allocChart.data.datasets[2].data = running;
    allocChart.options.elements.point.radius = pointRadius;
    allocChart.update('none');
  }

  // ---------------------------------------------------------------------------------------------
  // Wiring.

  function init() {
    buildLegend();
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      if (!t) return;
      $('token-input').value = '';
      try {
        sessionStorage.setItem(TOKEN_KEY, t);
      } catch (e) {
        // memory only
      }
      start(t);
    });
    $('forget').addEventListener('click', () => forgetToken(''));
    for (const radio of document.querySelectorAll('input[name="group-by"]')) {
      radio.addEventListener('change', () => {
        grid.by = radio.value === 'pod' ? 'pod' : 'asw';
        $('tooltip').hidden = true;
        if (lastNodes) renderNodes();
      });
    }
    $('job-state').addEventListener('change', () => {
      jobsSignature = '';
      renderJobs();
    });
    const canvas = $('grid');
    canvas.addEventListener('mousemove', onGridMove);
    canvas.addEventListener('mouseleave', () => {
      $('tooltip').hidden = true;
    });
    let resizeQueued = false;
    new ResizeObserver(() => {
      if (resizeQueued) return;
      resizeQueued = true;
      requestAnimationFrame(() => {
        resizeQueued = false;
        if (lastNodes && $('grid-wrap').clientWidth !== grid.width) renderNodes();
      });
    }).observe($('grid-wrap'));
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && token && !inFlight) poll();
    });
    window.addEventListener('hashchange', () => {
      const before = token;
      takeTokenFromFragment();
      if (token && token !== before) start(token);
    });

    takeTokenFromFragment();
    const t = token || storedToken();
    if (t) start(t);
    else showLogin('');
  }

  init();
})();
