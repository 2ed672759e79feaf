// Drives the service's dashboard in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core from dashboard/node_modules) against a running `estuary serve` with nodes and
// jobs, and checks what a person would see. Run by dashboard_test.cc:
//   node tests/dashboard/dashboard_check.mjs BASE_URL ADMIN_TOKEN SCREENSHOT_DIR
// Exit code 0 when every check passed; 1 with one line per problem otherwise. Any JavaScript error
// (uncaught, or logged with console.error), failed request or HTTP error answer is a problem,
// except the 401s of the one deliberately wrong token.
//  1. The page opened with #token=: the node grid (count, ASW and RDMA-POD groups, busy cells,
//     hover text), the jobs table against GET /v1/jobs (every job, its state, the pending job's
//     reason), the queues by priority, the allocation chart; the token leaves the address bar.
//  2. Without a token: the form; a wrong token is refused with a message; the right one opens the
//     dashboard, survives a reload (sessionStorage) and is forgotten on request.
//  3. A synthetic answer of 20,000 nodes and 1,000 jobs whose texts are markup: drawn on one canvas
//     in time, 500 rows, texts shown literally, no element made from them.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const require = createRequire(fileURLToPath(new URL('../../dashboard/package.json', import.meta.url)));
const { chromium } = require('playwright-core');

const [base, token, shotDir] = process.argv.slice(2);
if (!base || !token || !shotDir) {
  console.error('usage: node dashboard_check.mjs BASE_URL ADMIN_TOKEN SCREENSHOT_DIR');
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

async function api(route) {
  const res = await fetch(`${base}${route}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET ${route}: ${res.status}`);
  return res.json();
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
    const ids = rows.map((r) => Number(r[0]));
    check(ids.every((id, i) => i === 0 || ids[i - 1] >= id), `jobs are not most recent first: ${ids.join(',')}`);
    const waiting = jobs.filter((j) => j.state === 'pending' && j.reason);
    check(waiting.length > 0, 'the cluster has no pending job with a reason (test setup)');
    for (const j of waiting) {
      const r = byId.get(j.id);
      check(r && r[3] === 'pending' && r[8] === j.reason, `pending job ${j.name}: row ${JSON.stringify(r)}, want reason '${j.reason}'`);
      const q = await page.$$eval('#queues tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
      const row = q.find((c) => c[0].replace('HP', '') === String(j.priority));
      check(row && Number(row[1]) >= 1, `queues: no pending job at priority ${j.priority}: ${JSON.stringify(q)}`);
    }
    const running = jobs.filter((j) => j.state === 'running');
    check(running.length > 0, 'the cluster has no running job (test setup)');
    notes.push(`${jobs.length} jobs, ${running.length} running, ${waiting.length} pending with a reason`);
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
    const made = await page3.evaluate(() => document.querySelectorAll('main img, main b, main script').length);
    check(made === 0, `${made} elements made from API texts`);
    check(!(await page3.evaluate(() => window.__pwned)), 'markup from the API ran');
    const box = await page3.locator('#grid').boundingBox();
    await page3.mouse.move(box.x + 15, box.y + 29);
    await page3.waitForSelector('#tooltip:not([hidden])', { timeout: WAIT_MS });
    check((await page3.textContent('#tooltip')).includes('agent rack-<b>1</b>'), 'tooltip text of an agent name with markup');
  });
  await page3.screenshot({ path: path.join(shotDir, 'dashboard-20000.png') });
  await context3.close();
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
