// Drives the service's dashboard in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core from dashboard/node_modules) against a running `estuary serve` with nodes, tenant
// queues and jobs in them, and checks what a person would see. Run by dashboard_test.cc:
//   node tests/dashboard/dashboard_check.mjs BASE_URL ADMIN_TOKEN SCREENSHOT_DIR TENANT_TOKEN
// Exit code 0 when every check passed; 1 with one line per problem otherwise. Any JavaScript error
// (uncaught, or logged with console.error), failed request or HTTP error answer is a problem,
// except the 401s of the one deliberately wrong token, the tenant's 403s for admin-only endpoints
// and the 500 and 403 answers step 4 makes up.
// The queue figures the page shows are compared with a GET /v1/queues this script makes with the
// same token (retried at the page's next poll while they move).
//  1. The page opened with #token=: the node grid (count, ASW and RDMA-POD groups, busy cells,
//     hover text), the jobs table against GET /v1/jobs (every job, its state and queue, the
//     pending job's reason), the waiting work by priority, the tenant queues (tree order, depth,
//     every figure, the bar's borrowed part and marks), the allocation chart; the token leaves the
//     address bar.
//  1b. A tenant's token: the tenant queues are exactly the ones GET /v1/queues gives that tenant
//     (its queues and those above them, not the others), with their figures.
//  2. Without a token: the form; a wrong token is refused with a message; the right one opens the
//     dashboard, survives a reload (sessionStorage) and is forgotten on request.
//  3. A synthetic answer of 20,000 nodes and 1,000 jobs whose texts are markup: drawn on one canvas
//     in time, 500 rows, texts shown literally, no element made from them; no queues: the note
//     "No queues configured." and no queue column in the jobs table.
//  4. A synthetic GET /v1/queues of 400 queues (names and tenants with markup, parents listed
//     after their children): 400 rows in tree order in a scrolling box, texts literal; then the
//     endpoint answers 500 and 403: the card says so and the rest of the page keeps updating.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const require = createRequire(fileURLToPath(new URL('../../dashboard/package.json', import.meta.url)));
const { chromium } = require('playwright-core');

const [base, token, shotDir, tenantToken] = process.argv.slice(2);
if (!base || !token || !shotDir || !tenantToken) {
  console.error('usage: node dashboard_check.mjs BASE_URL ADMIN_TOKEN SCREENSHOT_DIR TENANT_TOKEN');
  process.exit(2);
}
const WAIT_MS = 15000;
const problems = [];
let closing = false;

function check(ok, what) {
  if (!ok) problems.push(what);
}

// Runs one named step; a thrown error (a timeout, a failed expectation) becomes a problem.
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    problems.push(`${name}: ${String(e.message || e).split('\n')[0]}`);
  }
}

function watch(page, label, allowed = () => false) {
  page.on('pageerror', (e) => problems.push(`${label}: page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !allowed(m.text())) problems.push(`${label}: console error: ${m.text()}`);
  });
  page.on('requestfailed', (r) => {
    const why = r.failure() ? r.failure().errorText : '';
    // A reload or the end of the run aborts a poll in flight: not the page's fault.
    if (closing || why === 'net::ERR_ABORTED') return;
    problems.push(`${label}: request failed: ${r.url()} (${why})`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !allowed(`${r.status()} ${r.url()}`)) problems.push(`${label}: HTTP ${r.status()} for ${r.url()}`);
  });
}

async function api(route, as = token) {
  const res = await fetch(`${base}${route}`, { headers: { Authorization: `Bearer ${as}` } });
  if (!res.ok) throw new Error(`GET ${route}: ${res.status}`);
  return res.json();
}

// The jobs table's cells by column header: col(headers, 'state').
async function jobHeaders(page) {
  return page.$$eval('#jobs thead th', (ths) => ths.map((th) => th.textContent));
}

// ---- Tenant queues: what the page should show for an answer of GET /v1/queues.
const fmtFigure = (x) => x.toLocaleString('en-US', { maximumFractionDigits: 3 });

// The queues depth first, children under their parents in the answer's order: [{q, depth}].
function treeOrder(queues) {
  const names = new Set(queues.map((q) => q.name));
  const out = [];
  const visit = (q, depth) => {
    out.push({ q, depth });
    for (const c of queues) if (c.parent === q.name) visit(c, depth + 1);
  };
  for (const q of queues) if (q.parent === undefined || !names.has(q.parent)) visit(q, 0);
  return out;
}

function wantQueueRows(queues) {
  return treeOrder(queues).map(({ q, depth }) => ({
    name: q.name,
    depth,
    cells: [
      fmtFigure(q.gpus.held), fmtFigure(q.gpus.guaranteed), fmtFigure(q.gpus.fair_share), fmtFigure(q.gpus.borrowed),
      q.gpus.limit === null ? 'none' : fmtFigure(q.gpus.limit), fmtFigure(q.gpus.lent), fmtFigure(q.gpus.pending),
      fmtFigure(q.jobs.waiting), fmtFigure(q.jobs.running), (q.tenants || []).join(', '),
    ],
  }));
}

async function shownQueueRows(page) {
  return page.$$eval('#tenant-queues tbody tr', (trs) => trs.map((tr) => ({
    name: tr.cells[0].querySelector('.qname').textContent,
    depth: Number(tr.dataset.depth),
    cells: [...tr.cells].slice(2).map((td) => td.textContent),
    scope: tr.cells[0].tagName === 'TH' ? tr.cells[0].getAttribute('scope') : '',
    borrowedFill: tr.querySelectorAll('.qbar .fill.borrowed').length,
    guaranteeMark: tr.querySelectorAll('.qbar .mark.guarantee').length,
    fairMark: tr.querySelectorAll('.qbar .mark.fair').length,
    barLabel: tr.querySelector('.qbar') ? tr.querySelector('.qbar').getAttribute('aria-label') : null,
    indent: parseFloat(getComputedStyle(tr.cells[0]).paddingLeft),
  })));
}

// Compares the page's tenant queues with GET /v1/queues as `as`, retried at the page's next poll
// while they differ (jobs start and grow between the two reads). Returns the last answer.
async function expectQueues(page, as, label) {
  let differs = '';
  let queues = [];
  for (let attempt = 0; attempt < 6; attempt += 1) {
    const polls = Number(await page.evaluate(() => document.documentElement.dataset.polls));
    ({ queues } = await api('/v1/queues', as));
    const want = wantQueueRows(queues);
    const got = await shownQueueRows(page);
    differs = '';
    if (got.length !== want.length || got.some((g, i) => g.name !== want[i].name)) {
      differs = `rows ${JSON.stringify(got.map((g) => g.name))}, want ${JSON.stringify(want.map((w) => w.name))}`;
    } else {
      for (let i = 0; i < want.length && !differs; i += 1) {
        const g = got[i];
        const w = want[i];
        if (g.depth !== w.depth) differs = `queue ${w.name} at depth ${g.depth}, want ${w.depth}`;
        else if (JSON.stringify(g.cells) !== JSON.stringify(w.cells)) {
          differs = `queue ${w.name}: ${JSON.stringify(g.cells)}, want ${JSON.stringify(w.cells)}`;
        }
      }
    }
    if (!differs) break;
    await page.waitForFunction((n) => Number(document.documentElement.dataset.polls) > n, polls, { timeout: WAIT_MS });
  }
  check(!differs, `${label}: tenant queues differ from GET /v1/queues: ${differs}`);
  return queues;
}

// For waitForFunction (one argument): element `id` exists and its text is `want`.
const textIs = ([id, want]) => {
  const e = document.getElementById(id);
  return e !== null && e.textContent === want;
};
const plural = (n, word) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true });
const started = Date.now();
const notes = [];
try {
  // ---- 1. The demo cluster, token in the fragment.
  const { nodes } = await api('/v1/nodes');
  const asws = new Set(nodes.map((n) => n.domains.data[2]));
  const pods = new Set(nodes.map((n) => n.domains.param[0]));
  const context = await browser.newContext({ viewport: { width: 1440, height: 1100 } });
  const page = await context.newPage();
  watch(page, 'dashboard');
  await step('open with #token=', async () => {
    await page.goto(`${base}/dashboard/#token=${encodeURIComponent(token)}`);
    await page.waitForFunction(textIs, ['node-count', `${nodes.length} nodes in ${plural(asws.size, 'ASW')}`], { timeout: WAIT_MS });
  });
  await step('token handling', async () => {
    check(!page.url().includes('token'), `the token stays in the address bar: ${page.url()}`);
    const kept = await page.evaluate(() => sessionStorage.getItem('estuary.dashboard.token'));
    check(kept === token, 'the token is not kept in sessionStorage');
  });
  await step('node grid', async () => {
    const grid = await page.evaluate(() => {
      const c = document.getElementById('grid');
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let busy = 0;
      for (let i = 0; i < px.length; i += 4) {
        // The GPU-use blues (idle grey, the group boxes and the labels are not this blue).
        if (px[i + 3] === 255 && px[i + 2] - px[i] >= 40 && px[i + 2] >= 100) busy += 1;
      }
      return { cells: c.dataset.cells, groups: c.dataset.groups, busy };
    });
    check(grid.cells === String(nodes.length), `grid draws ${grid.cells} cells, want ${nodes.length}`);
    check(grid.groups === String(asws.size), `grid draws ${grid.groups} ASW groups, want ${asws.size}`);
    check(grid.busy > 0, 'no node cell is coloured as in use');
    const summary = await page.textContent('#summary');
    check(summary.includes(`${nodes.length} nodes`), `summary: '${summary}'`);
  });
  await step('jobs table', async () => {
    const { jobs } = await api('/v1/jobs');
    await page.waitForFunction((n) => document.querySelectorAll('#jobs tbody tr').length === n, Math.min(jobs.length, 500), { timeout: WAIT_MS });
    const rows = await page.$$eval('#jobs tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    const byId = new Map(rows.map((r) => [r[0], r]));
    for (const j of jobs) {
      const r = byId.get(j.id);
      check(r && r[1] === j.name, `job ${j.id} (${j.name}) is not in the table`);
    }
    const heads = await jobHeaders(page);
    const col = (h) => heads.indexOf(h);
    check(col('queue') > 0 && (await page.isVisible('#jobs thead th.col-queue')), `no visible queue column: ${JSON.stringify(heads)}`);
    for (const j of jobs) {
      const r = byId.get(j.id);
      check(j.queue && r && r[col('queue')] === j.queue, `job ${j.name}: queue cell '${r && r[col('queue')]}', want '${j.queue}'`);
    }
    const ids = rows.map((r) => Number(r[0]));
    check(ids.every((id, i) => i === 0 || ids[i - 1] >= id), `jobs are not most recent first: ${ids.join(',')}`);
    const waiting = jobs.filter((j) => j.state === 'pending' && j.reason);
    check(waiting.length > 0, 'the cluster has no pending job with a reason (test setup)');
    for (const j of waiting) {
      const r = byId.get(j.id);
      check(r && r[col('state')] === 'pending' && r[col('why pending')] === j.reason,
        `pending job ${j.name}: row ${JSON.stringify(r)}, want reason '${j.reason}'`);
      const q = await page.$$eval('#by-priority tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
      const row = q.find((c) => c[0].replace('HP', '') === String(j.priority));
      check(row && Number(row[1]) >= 1, `waiting work by priority: no pending job at priority ${j.priority}: ${JSON.stringify(q)}`);
    }
    const running = jobs.filter((j) => j.state === 'running');
    check(running.length > 0, 'the cluster has no running job (test setup)');
    notes.push(`${jobs.length} jobs, ${running.length} running, ${waiting.length} pending with a reason`);
  });
  let adminQueues = [];
  await step('tenant queues', async () => {
    check((await page.textContent('#priority-section h2')) === 'Waiting work by priority', 'the priority card is not named "Waiting work by priority"');
    check((await page.textContent('#tenant-queues-section h2')) === 'Tenant queues', 'no "Tenant queues" card');
    await page.waitForFunction(() => document.querySelectorAll('#tenant-queues tbody tr').length > 0, null, { timeout: WAIT_MS });
    const queues = await expectQueues(page, token, 'admin');
    adminQueues = queues;
    // Test setup: a parent listed after its child, a borrowing queue, pending GPUs, a limit.
    const at = new Map(queues.map((q, i) => [q.name, i]));
    check(queues.some((q) => q.parent !== undefined && at.get(q.parent) > at.get(q.name)), 'no parent listed after its child (test setup)');
    check(queues.some((q) => q.gpus.borrowed > 0), 'no queue borrows (test setup)');
    check(queues.some((q) => q.gpus.pending > 0), 'no queue has pending GPUs (test setup)');
    check(queues.some((q) => q.gpus.limit !== null), 'no queue has a limit (test setup)');
    const rows = await shownQueueRows(page);
    const byName = new Map(queues.map((q) => [q.name, q]));
    for (const r of rows) {
      const q = byName.get(r.name);
      if (!q) continue;
      check(r.scope === 'row', `queue ${r.name}: its name is not a row header`);
      check((r.borrowedFill > 0) === (q.gpus.borrowed > 0), `queue ${r.name}: borrowed part of the bar ${r.borrowedFill}, borrowed ${q.gpus.borrowed}`);
      check((r.guaranteeMark > 0) === (q.gpus.guaranteed > 0), `queue ${r.name}: guarantee mark ${r.guaranteeMark}`);
      check((r.fairMark > 0) === (q.gpus.fair_share > 0), `queue ${r.name}: fair-share mark ${r.fairMark}`);
      check(r.barLabel && r.barLabel.startsWith(`${fmtFigure(q.gpus.held)} GPUs held`), `queue ${r.name}: bar label '${r.barLabel}'`);
    }
    const indents = rows.map((r) => `${r.depth}:${r.indent}`);
    check(rows.every((r) => rows.every((o) => o.depth <= r.depth || o.indent > r.indent)), `deeper queues are not indented further: ${indents}`);
    const sharing = await page.textContent('#tenant-queues-sharing');
    check(sharing.startsWith('sharing: '), `sharing line: '${sharing}'`);
    notes.push(`${queues.length} queues as ${rows.map((r) => `${'-'.repeat(r.depth)}${r.name}`).join(' ')}`);
  });
  await step('allocation chart', async () => {
    await page.waitForFunction(() => {
      const chart = window.Chart && window.Chart.getChart('alloc-chart');
      return chart && chart.data.datasets.length === 3 && chart.data.datasets[0].data.length >= 1;
    }, null, { timeout: WAIT_MS });
    const last = await page.evaluate(() => {
      const d = window.Chart.getChart('alloc-chart').data.datasets;
      return d.map((s) => s.data[s.data.length - 1].y);
    });
    check(last.every((y) => Number.isFinite(y) && y >= 0), `chart values ${JSON.stringify(last)}`);
  });
  await step('group by RDMA-POD', async () => {
    await page.click('text=RDMA-POD');
    await page.waitForFunction(textIs, ['node-count', `${nodes.length} nodes in ${plural(pods.size, 'RDMA-POD')}`], { timeout: WAIT_MS });
    check((await page.getAttribute('#grid', 'data-groups')) === String(pods.size), 'RDMA-POD groups on the canvas');
    await page.click('text=ASW');
    await page.waitForFunction(textIs, ['node-count', `${nodes.length} nodes in ${plural(asws.size, 'ASW')}`], { timeout: WAIT_MS });
  });
  await step('polls again', async () => {
    await page.waitForFunction(() => Number(document.documentElement.dataset.polls) >= 2, null, { timeout: WAIT_MS });
  });
  await step('hover a node', async () => {
    const box = await page.locator('#grid').boundingBox();
    // The first cell of the first group: gap 8 + padding 5, label 14 below.
    await page.mouse.move(box.x + 19, box.y + 33);
    await page.waitForSelector('#tooltip:not([hidden])', { timeout: WAIT_MS });
    const tip = await page.textContent('#tooltip');
    const first = [...nodes].sort((a, b) => (a.name < b.name ? -1 : 1))[0].name;
    check(tip.startsWith(first) && tip.includes('GPUs in use'), `tooltip: '${tip}', want node ${first}`);
  });
  await page.mouse.move(0, 0);
  await page.screenshot({ path: path.join(shotDir, 'dashboard.png'), fullPage: true });
  await context.close();

  // ---- 1b. A tenant's token: only the tenant's queues (and those above them).
  const contextT = await browser.newContext({ viewport: { width: 1440, height: 1100 } });
  const pageT = await contextT.newPage();
  // Nodes and the allocation history are an admin's: their 403s are expected.
  watch(pageT, 'tenant', (text) => /^403 .*\/v1\/(nodes|stats)$/.test(text) || /status of 403/.test(text));
  await step('tenant queues (tenant token)', async () => {
    await pageT.goto(`${base}/dashboard/#token=${encodeURIComponent(tenantToken)}`);
    await pageT.waitForFunction(() => document.querySelectorAll('#tenant-queues tbody tr').length > 0, null, { timeout: WAIT_MS });
    const mine = await expectQueues(pageT, tenantToken, 'tenant');
    const shown = (await shownQueueRows(pageT)).map((r) => r.name);
    const others = adminQueues.map((q) => q.name).filter((n) => !mine.some((q) => q.name === n));
    check(others.length > 0, `the tenant sees every queue: ${JSON.stringify(shown)} (test setup)`);
    check(others.every((n) => !shown.includes(n)), `the tenant's page shows queues not its own: ${JSON.stringify(shown)}`);
    check(await pageT.isVisible('#nodes-note'), 'no note that nodes need an admin token');
    notes.push(`the tenant sees ${shown.join(', ')} (not ${others.join(', ')})`);
  });
  await pageT.screenshot({ path: path.join(shotDir, 'dashboard-tenant.png'), fullPage: true });
  await contextT.close();

  // ---- 2. No token: the form; a wrong token; the right one; reload; forget.
  const wrong = 'wrong-token-0123456789';
  const context2 = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page2 = await context2.newPage();
  let expect401 = false;
  watch(page2, 'sign-in', (text) => expect401 && (text.startsWith('401 ') || /status of 401/.test(text)));
  await step('sign-in form', async () => {
    await page2.goto(`${base}/`);
    check(new URL(page2.url()).pathname === '/dashboard/', `/ went to ${page2.url()}`);
    await page2.waitForSelector('#login:not([hidden])', { timeout: WAIT_MS });
    await page2.screenshot({ path: path.join(shotDir, 'dashboard-signin.png') });
    check(!(await page2.isVisible('#main')), 'the dashboard shows beside the sign-in form');
    expect401 = true;
    await page2.fill('#token-input', wrong);
    await page2.click('#login button[type=submit]');
    await page2.waitForFunction(() => document.getElementById('login-error').textContent.includes('401'), null, { timeout: WAIT_MS });
    check(await page2.isVisible('#login'), 'the form is not shown again after a wrong token');
    check(!(await page2.isVisible('#main')), 'the dashboard shows after a wrong token');
    await page2.waitForTimeout(300); // the other refused requests of that poll
    expect401 = false;
    await page2.fill('#token-input', token);
    await page2.click('#login button[type=submit]');
    await page2.waitForFunction(textIs, ['node-count', `${nodes.length} nodes in ${plural(asws.size, 'ASW')}`], { timeout: WAIT_MS });
    await page2.reload();
    await page2.waitForFunction(textIs, ['node-count', `${nodes.length} nodes in ${plural(asws.size, 'ASW')}`], { timeout: WAIT_MS });
    await page2.click('#forget');
    await page2.waitForSelector('#login:not([hidden])', { timeout: WAIT_MS });
    const kept = await page2.evaluate(() => sessionStorage.getItem('estuary.dashboard.token'));
    check(kept === null, 'the token is still in sessionStorage after "Forget token"');
  });
  await context2.close();

  // ---- 3. 20,000 nodes and 1,000 jobs with markup in their texts (answers made up here).
  const hostile = '<img src=x onerror="window.__pwned=1">';
  const bigNodes = [];
  for (let i = 0; i < 20000; i += 1) {
    const asw = Math.floor(i / 32);
    bigNodes.push({
      name: `big-n${String(i).padStart(6, '0')}`,
      agent: 'rack-<b>1</b>',
      gpus: 8,
      gpu_model: 'H800',
      domains: { data: ['az0', `spine${Math.floor(asw / 8)}`, `asw${asw}`], param: [`pod${Math.floor(i / 64)}`] },
      state: i % 997 === 0 ? 'failed' : i % 501 === 0 ? 'cordoned' : 'ready',
      gpu_milli_used: (i % 9) * 1000 > 8000 ? 8000 : (i % 9) * 1000,
      last_heartbeat_ms: Date.now(),
    });
  }
  const bigJobs = [];
  for (let i = 1; i <= 1000; i += 1) {
    bigJobs.push({
      id: String(i), name: i === 1000 ? hostile : `job${i}`, tenant: i === 999 ? '<script>x</script>' : 'team-a',
      state: i % 3 === 0 ? 'pending' : 'running', replicas: { min: 1, max: 1, step: 1 }, gpus: 8, gpu_milli: 0,
      cpu_milli: 1000, memory_mib: 1024, priority: i % 3 === 0 ? 900 : 300, preemptible: false,
      bound_replicas: 0, running_replicas: i % 3 === 0 ? 0 : 1, submitted_ms: 1700000000000 + i * 1000,
      running_ms: 0, ended_ms: 0, reason: i % 3 === 0 ? `${hostile} & "quotes"` : '',
    });
  }
  const context3 = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page3 = await context3.newPage();
  watch(page3, 'synthetic');
  await page3.route('**/v1/nodes', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ nodes: bigNodes }) }));
  await page3.route('**/v1/jobs', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ jobs: bigJobs }) }));
  await page3.route('**/v1/queues', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ queues: [], sharing: {} }) }));
  await step('20,000 nodes', async () => {
    await page3.goto(`${base}/dashboard/#token=${encodeURIComponent(token)}`);
    await page3.waitForFunction(textIs, ['node-count', '20,000 nodes in 625 ASWs'], { timeout: WAIT_MS });
    const elements = await page3.evaluate(() => document.querySelectorAll('#nodes-section *').length);
    check(elements < 60, `${elements} DOM elements in the nodes' section for 20,000 nodes`);
    const ms = await page3.evaluate(() => {
      const t0 = performance.now();
      document.querySelector('input[name="group-by"][value="pod"]').click();
      return performance.now() - t0;
    });
    check(ms < 1000, `regrouping 20,000 nodes took ${ms.toFixed(0)} ms`);
    check((await page3.textContent('#node-count')) === '20,000 nodes in 313 RDMA-PODs', 'RDMA-POD groups of 20,000 nodes');
    notes.push(`20,000 nodes regrouped and drawn in ${ms.toFixed(0)} ms, ${elements} DOM elements in the nodes' section`);
  });
  await step('markup in API texts', async () => {
    await page3.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 500, null, { timeout: WAIT_MS });
    check((await page3.textContent('#jobs-count')) === '500 most recent of 1,000', `jobs count: ${await page3.textContent('#jobs-count')}`);
    const first = await page3.$eval('#jobs tbody tr', (tr) => [...tr.cells].map((td) => td.textContent));
    check(first[0] === '1000' && first[1] === hostile, `first row ${JSON.stringify(first)}`);
    const reason = await page3.$eval('#jobs tbody tr.state-pending td.reason', (td) => td.textContent);
    check(reason === `${hostile} & "quotes"`, `reason shown as '${reason}'`);
    const tenant = await page3.$$eval('#jobs tbody tr', (trs) => trs[1].cells[2].textContent);
    check(tenant === '<script>x</script>', `tenant shown as '${tenant}'`);
    check(!(await page3.isVisible('#jobs thead th.col-queue')), 'a queue column for jobs without queues');
    const made = await page3.evaluate(() => document.querySelectorAll('main img, main b, main script').length);
    check(made === 0, `${made} elements made from API texts`);
    check(!(await page3.evaluate(() => window.__pwned)), 'markup from the API ran');
    const box = await page3.locator('#grid').boundingBox();
    await page3.mouse.move(box.x + 15, box.y + 29);
    await page3.waitForSelector('#tooltip:not([hidden])', { timeout: WAIT_MS });
    check((await page3.textContent('#tooltip')).includes('agent rack-<b>1</b>'), 'tooltip text of an agent name with markup');
  });
  await step('no queues', async () => {
    await page3.waitForFunction(textIs, ['tenant-queues-note', 'No queues configured.'], { timeout: WAIT_MS });
    check(!(await page3.isVisible('#tenant-queues')), 'the queue table shows without queues');
  });
  await page3.screenshot({ path: path.join(shotDir, 'dashboard-20000.png') });
  await context3.close();

  // ---- 4. 400 synthetic queues, then GET /v1/queues fails (500) and is refused (403).
  const bigQueues = [];
  const quota = (gpus) => ({ gpus });
  for (let o = 0; o < 20; o += 1) {
    const teams = [];
    for (let t = 0; t < 19; t += 1) {
      const held = (o * 19 + t) % 7 === 0 ? 40.5 : 8 * (t % 5);
      teams.push({
        name: t === 3 ? `org${o}-<i>team</i>${t}` : `org${o}-team${t}`, parent: `org${o}`,
        tenants: t === 5 ? ['<b>bold</b>', 'team-x'] : undefined, guarantee: quota(16), weight: 1, max_priority: 1000,
        reclaim: true, reclaimable: true,
        gpus: { held, guaranteed: 16, limit: t % 4 === 0 ? 64 : null, fair_share: 20.125, entitled: 16,
                borrowed: Math.max(0, held - 16), lent: t === 7 ? 8 : 0, pending: t * 2 },
        jobs: { waiting: t, running: held > 0 ? 1 : 0 },
      });
    }
    // Half the orgs are listed after their teams.
    const org = { name: `org${o}`, guarantee: quota(400), weight: 1, max_priority: 1000, reclaim: true, reclaimable: true,
                  gpus: { held: 300, guaranteed: 400, limit: null, fair_share: 410, entitled: 400, borrowed: 0, lent: 8, pending: 100 },
                  jobs: { waiting: 50, running: 10 } };
    if (o % 2) bigQueues.push(...teams, org);
    else bigQueues.push(org, ...teams);
  }
  let queuesAnswer = { status: 200, body: JSON.stringify({ queues: bigQueues, sharing: { borrow: true, reclaim: true, weights: true, reclaim_to: 'guarantee', usage_half_life_s: 0, cooldown_s: 300, reborrow_s: 3600 } }) };
  let queuesAsked = 0;
  const context4 = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page4 = await context4.newPage();
  watch(page4, 'synthetic queues', (text) => /^(500|403) .*\/v1\/queues$/.test(text) || /status of (500|403)/.test(text));
  await page4.route('**/v1/queues', (r) => {
    queuesAsked += 1;
    return r.fulfill({ status: queuesAnswer.status, contentType: 'application/json', body: queuesAnswer.body });
  });
  await step('400 queues', async () => {
    await page4.goto(`${base}/dashboard/#token=${encodeURIComponent(token)}`);
    await page4.waitForFunction(() => document.querySelectorAll('#tenant-queues tbody tr').length === 400, null, { timeout: WAIT_MS });
    const got = await shownQueueRows(page4);
    const want = wantQueueRows(bigQueues);
    const bad = want.findIndex((w, i) => got[i].name !== w.name || got[i].depth !== w.depth || JSON.stringify(got[i].cells) !== JSON.stringify(w.cells));
    check(bad < 0, `400 queues: row ${bad} is ${JSON.stringify(got[bad])}, want ${JSON.stringify(want[bad])}`);
    check((await page4.textContent('#tenant-queues-count')) === '400 queues', `count: ${await page4.textContent('#tenant-queues-count')}`);
    const box = await page4.evaluate(() => {
      const w = document.getElementById('tenant-queues-wrap');
      return { scroll: w.scrollHeight, client: w.clientHeight, view: window.innerHeight };
    });
    check(box.scroll > box.client && box.client <= box.view, `400 queues do not scroll in their box: ${JSON.stringify(box)}`);
    const made = await page4.evaluate(() => document.querySelectorAll('#tenant-queues i, #tenant-queues b').length);
    check(made === 0, `${made} elements made from queue names or tenants`);
  });
  await page4.screenshot({ path: path.join(shotDir, 'dashboard-queues.png') });
  await step('GET /v1/queues fails, then is refused', async () => {
    queuesAnswer = { status: 500, body: JSON.stringify({ error: 'boom' }) };
    await page4.waitForFunction(() => document.getElementById('tenant-queues-note').textContent.includes('Cannot load the queues now: /v1/queues: 500 boom'), null, { timeout: WAIT_MS });
    const polls = Number(await page4.evaluate(() => document.documentElement.dataset.polls));
    await page4.waitForFunction((n) => Number(document.documentElement.dataset.polls) > n, polls, { timeout: WAIT_MS });
    check((await page4.textContent('#node-count')) === `${nodes.length} nodes in ${plural(asws.size, 'ASW')}`, 'the nodes stop updating when the queues fail');
    check(!(await page4.getAttribute('#status', 'class')).includes('bad'), `status: ${await page4.textContent('#status')}`);
    queuesAnswer = { status: 403, body: JSON.stringify({ error: 'no' }) };
    await page4.waitForFunction(textIs, ['tenant-queues-note', 'Tenant queues need a tenant or admin token.'], { timeout: WAIT_MS });
    const asked = queuesAsked;
    const after = Number(await page4.evaluate(() => document.documentElement.dataset.polls));
    await page4.waitForFunction((n) => Number(document.documentElement.dataset.polls) > n + 1, after, { timeout: WAIT_MS });
    check(queuesAsked === asked, `GET /v1/queues asked ${queuesAsked - asked} more times after a 403`);
    check(!(await page4.isVisible('#tenant-queues')), 'the queue table shows after a 403');
  });
  await context4.close();
} catch (e) {
  problems.push(`unexpected: ${e.stack || e}`);
} finally {
  closing = true;
  await browser.close();
}

const seconds = ((Date.now() - started) / 1000).toFixed(1);
if (problems.length) {
  for (const p of problems) console.log(`PROBLEM ${p}`);
  console.log(`dashboard_check: ${problems.length} problem(s) in ${seconds} s`);
  process.exit(1);
}
console.log(`dashboard_check: ok in ${seconds} s (${notes.join('; ')})`);
