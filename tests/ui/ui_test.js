// bitflipd's web page in headless Chromium (Debian's, driven by playwright-core):
// a tenant enters its token, uploads a model and an eval set through the page,
// submits a campaign from the form, watches its progress bar advance from the
// event stream, reads the result's headline and figures, cancels a second
// campaign; a second tenant sees none of it; no console errors and no CSP
// violations anywhere; screenshots at 1280x800 and 375x812.
//
// Run by tests/ui/ui_test.sh, which starts the daemon and sets:
//   BF_UI_URL, BF_UI_TOKEN_A, BF_UI_TOKEN_B, BF_UI_FIXTURES, BF_UI_OUT,
//   BF_UI_MODULES (node_modules with playwright-core), BF_CHROMIUM, BF_UI_TRIALS.
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require(path.resolve(process.env.BF_UI_MODULES, 'playwright-core'));

const URL_ = process.env.BF_UI_URL;
const TOKEN_A = process.env.BF_UI_TOKEN_A;
const TOKEN_B = process.env.BF_UI_TOKEN_B;
const FIX = process.env.BF_UI_FIXTURES;
const OUT = process.env.BF_UI_OUT;
const MODEL = path.join(FIX, 'conformance', 'demo_digits.onnx');
const DATA = path.join(FIX, 'conformance', 'demo_digits.eval.safetensors');
const REF = JSON.parse(fs.readFileSync(path.join(FIX, 'conformance', 'demo_digits.ref.json'), 'utf8'));
// a hang guard, not a speed assertion: the slow campaign takes seconds
const LONG = 240000;
const TRIALS = Number(process.env.BF_UI_TRIALS || 60000);
const fmt = (n) => new Intl.NumberFormat('en-US').format(n);

let failures = 0;
function check(name, cond, detail) {
  if (cond) console.log('ok   ' + name);
  else { failures++; console.log('FAIL ' + name + (detail !== undefined ? ': ' + detail : '')); }
}

// The eval set's sample count from its safetensors header (8-byte length, JSON),
// read here rather than taken from the daemon.
function safetensorsSamples(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const head = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  return head.labels.shape[0];
}

// Console errors, page errors and CSP violations of a page, collected.
function watch(page, label, problems) {
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content.Security.Policy|Refused to/i.test(m.text())) problems.push(label + ' console ' + m.type() + ': ' + m.text());
  });
  page.on('pageerror', (e) => problems.push(label + ' page error: ' + e.message));
  page.on('requestfailed', (r) => {
    // event streams are aborted on purpose (tenant switch, page close)
    if (!/\/events$/.test(new URL(r.url()).pathname)) problems.push(label + ' request failed: ' + r.url() + ' ' + (r.failure() || {}).errorText);
  });
}

async function newPage(browser, viewport, label, problems) {
  const context = await browser.newContext({ viewport });
  // a listener for CSP violations before any page script runs (CDP injects
  // it, so the page's own policy does not apply to it)
  await context.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
  });
  const page = await context.newPage();
  watch(page, label, problems);
  return { context, page };
}

async function signIn(page, token) {
  await page.locator('#token').fill(token);
  await page.getByRole('button', { name: 'Use token' }).click();
  await page.locator('#status').filter({ hasText: /models, .* datasets, .* campaigns\./ }).waitFor();
}

async function specWith(page, fields) {
  const spec = JSON.parse(await page.locator('#spec').inputValue());
  Object.assign(spec, fields);
  await page.locator('#spec').fill(JSON.stringify(spec, null, 2));
  await page.locator('#spec').dispatchEvent('input');
}

async function main() {
  fs.mkdirSync(OUT, { recursive: true });
  const args = ['--disable-gpu', '--disable-dev-shm-usage'];
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  const browser = await chromium.launch({ executablePath: process.env.BF_CHROMIUM || '/usr/bin/chromium', headless: true, args });
  const problems = [];
  try {
    // --- the page and its headers -----------------------------------------
    const { context, page } = await newPage(browser, { width: 1280, height: 800 }, 'alice', problems);
    const res = await page.goto(URL_ + '/');
    const h = res.headers();
    check('page CSP has no inline script', /script-src 'self';/.test(h['content-security-policy'] || '') &&
      !/unsafe-inline|unsafe-eval/.test(h['content-security-policy']), h['content-security-policy']);
    check('page nosniff', h['x-content-type-options'] === 'nosniff');
    check('page no-referrer', h['referrer-policy'] === 'no-referrer');
    await page.locator('#status').filter({ hasText: 'needs a token' }).waitFor();
    check('without a token the page asks for one', true);

    // every control has a label; keyboard reaches the token field first
    const unlabelled = await page.evaluate(() => Array.from(document.querySelectorAll('input, select, textarea, progress'))
      .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map((e) => e.id || e.tagName));
    check('every control has a <label>', unlabelled.length === 0, unlabelled.join(', '));
    await page.keyboard.press('Tab');   // the skip link
    await page.keyboard.press('Tab');
    check('Tab reaches the token field', await page.evaluate(() => document.activeElement.id) === 'token');

    // --- token, uploads through the page ------------------------------------
    await page.keyboard.type(TOKEN_A);
    await page.keyboard.press('Enter');
    await page.locator('#status').filter({ hasText: '0 models, 0 datasets, 0 campaigns.' }).waitFor();
    check('token kept in sessionStorage, not localStorage', await page.evaluate((t) =>
      sessionStorage.getItem('bitflip.token') === t && localStorage.length === 0, TOKEN_A));
    check('token not in the URL', !page.url().includes(TOKEN_A));

    await page.locator('#model-file').setInputFiles(MODEL);
    await page.getByRole('button', { name: 'Upload model' }).click();
    await page.locator('#model-list li[data-id]').first().waitFor();
    await page.locator('#dataset-file').setInputFiles(DATA);
    await page.getByRole('button', { name: 'Upload dataset' }).click();
    await page.locator('#dataset-list li[data-id]').first().waitFor();
    check('model listed by its file name', (await page.locator('#model-list li[data-id] .title').textContent()) === 'demo_digits.onnx');
    const samples = safetensorsSamples(DATA);
    const dsMeta = await page.locator('#dataset-list li[data-id] .meta').textContent();
    check('dataset shows its sample count', dsMeta.includes(new Intl.NumberFormat('en-US').format(samples) + ' samples'), dsMeta);

    // the fault surface: the ops the fixture generator recorded
    await page.locator('#model-list summary').click();
    await page.locator('#model-list .surface table').waitFor();
    const surface = await page.locator('#model-list .surface').textContent();
    const paramOps = REF.onnx_ops.filter((op) => op === 'Conv' || op === 'Gemm');
    check('fault surface lists the parameter tensors of ' + paramOps.join(', '),
      paramOps.every((op) => surface.includes(op)) && (await page.locator('#model-list .surface tbody tr').count()) >= 2, surface);

    // --- the form: schema errors, then a campaign ---------------------------
    const modelId = await page.locator('#model-list li[data-id]').getAttribute('data-id');
    const dataId = await page.locator('#dataset-list li[data-id]').getAttribute('data-id');
    await page.locator('#spec-model').selectOption(modelId);
    await page.locator('#spec-dataset').selectOption(dataId);
    let spec = JSON.parse(await page.locator('#spec').inputValue());
    check('the pickers fill the spec', spec.model === modelId && spec.dataset === dataId);
    await specWith(page, { trials: 0, sampling: 'bogus' });
    await page.locator('#spec-errors li').first().waitFor();
    const errText = await page.locator('#spec-errors').textContent();
    check('schema errors name the fields', errText.includes('/trials') && errText.includes('/sampling'), errText);
    check('an invalid spec cannot be submitted', await page.locator('#spec-submit').isDisabled());
    await specWith(page, { trials: TRIALS, sampling: 'uniform' });
    await page.waitForFunction(() => !document.querySelector('#spec-errors li'));
    check('a valid spec can be submitted', await page.locator('#spec-submit').isEnabled());
    await page.locator('#spec-submit').click();
    const first = page.locator('#campaign-list li[data-id]').first();
    await first.waitFor();
    const cid = await first.getAttribute('data-id');

    // --- the progress bar moves (values over time, not a speed) --------------
    const seen = [];
    let shot = false;
    for (;;) {
      const v = await first.locator('progress').evaluate((p) => ({ value: p.value, max: p.max }));
      const cls = await first.getAttribute('class');
      if (!seen.length || v.value !== seen[seen.length - 1]) seen.push(v.value);
      if (!shot && v.value > 0.2 * v.max && v.value < 0.8 * v.max) {
        shot = true;   // the live picture: a campaign half way
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: path.join(OUT, 'ui-desktop.png') });
      }
      if (/state-(succeeded|failed|canceled)/.test(cls)) break;
      await page.waitForTimeout(150);
    }
    const rising = seen.every((v, i) => i === 0 || v > seen[i - 1]);
    check('the progress bar advanced live (' + seen.length + ' values)', seen.length >= 3 && rising, seen.join(' '));
    check('the campaign succeeded', /state-succeeded/.test(await first.getAttribute('class')));
    const ptext = await first.locator('.progress-text').textContent();
    check('trials formatted for people', ptext.includes(fmt(TRIALS) + ' of ' + fmt(TRIALS) + ' trials (100%)'), ptext);
    if (!shot) await page.screenshot({ path: path.join(OUT, 'ui-desktop.png') });

    // --- the result: headline and figures as <img> from blob: URLs -----------
    await first.getByRole('button', { name: /Show the result/ }).click();
    await page.locator('#result figure img').first().waitFor();
    const figs = await (await fetch(URL_ + '/v1/campaigns/' + cid + '/figures', { headers: { Authorization: 'Bearer ' + TOKEN_A } })).json();
    const imgs = await page.$$eval('#result figure img', (list) => Promise.all(list.map((i) => i.decode().then(
      () => ({ src: i.src, w: i.naturalWidth, alt: i.alt }), () => ({ src: i.src, w: 0, alt: i.alt })))));
    check('one <img> per figure (' + figs.figures.length + ')', imgs.length === figs.figures.length && imgs.length >= 1);
    check('figures load from blob: URLs', imgs.every((i) => i.src.startsWith('blob:') && i.w > 0), JSON.stringify(imgs));
    check('figures carry their alt text', imgs.every((i, k) => i.alt === (figs.figures[k].alt || figs.figures[k].title)));
    check('no SVG inserted into the page', await page.locator('svg').count() === 0);
    check('the headline is the daemon\'s', (await page.locator('#headline').textContent()) === figs.headline, figs.headline);
    check('no picture form for a classification result', await page.locator('#picture-form').isHidden());
    await page.screenshot({ path: path.join(OUT, 'ui-result.png') });

    // --- a detection campaign: IVMOD per tensor and per bit on the page --------
    // uploaded and submitted through the API; shown through the page, whose
    // IVMOD bars must carry the result's counts
    const auth = { Authorization: 'Bearer ' + TOKEN_A };
    const up = async (kind, file) => (await (await fetch(URL_ + '/v1/' + kind + '?name=' + path.basename(file), {
      method: 'POST', headers: Object.assign({ 'Content-Type': 'application/octet-stream' }, auth), body: fs.readFileSync(file) })).json()).id;
    const detModel = await up('models', path.join(FIX, 'onesample', 'onesample_dyn.onnx'));
    const detData = await up('datasets', path.join(FIX, 'onesample', 'onesample_det.eval.safetensors'));
    const sub = await (await fetch(URL_ + '/v1/campaigns', { method: 'POST', headers: Object.assign({ 'Content-Type': 'application/json' }, auth),
      body: JSON.stringify({ model: detModel, dataset: detData, trials: 40, seed: 5, faults: { target: 'weights', model: 'bitflip' } }) })).json();
    check('detection campaign submitted', typeof sub.id === 'string', JSON.stringify(sub));
    await page.reload();   // the lists again (the token stays in sessionStorage)
    await page.locator('#campaign-list li[data-id="' + sub.id + '"]').waitFor();
    const detItem = page.locator('#campaign-list li.state-succeeded[data-id="' + sub.id + '"]');
    await detItem.waitFor({ timeout: LONG });
    await detItem.getByRole('button', { name: /Show the result/ }).click();
    await page.locator('#result figure[data-name="ivmod_tensors"] img').waitFor();
    const detFigs = await (await fetch(URL_ + '/v1/campaigns/' + sub.id + '/figures', { headers: auth })).json();
    const detRes = await (await fetch(URL_ + '/v1/campaigns/' + sub.id + '/results', { headers: auth })).json();
    for (const [name, groups, key] of [['ivmod_tensors', detRes.by_tensor, (g) => g.torch_name || g.tensor],
      ['ivmod_bits', detRes.by_bit, (g) => 'bit ' + g.bit]]) {
      check(name + ' shown on the page', await page.locator('#result figure[data-name="' + name + '"] img').count() === 1);
      const fig = detFigs.figures.find((f) => f.name === name);
      // the bars' counts, read from the SVG the page shows (here, not in the
      // page: an SVG parsed there would trip the page's CSP with its <style>)
      const bars = Array.from((fig ? fig.svg : '').matchAll(
        /<g class="bfr-ivmod" data-critical="(\d+)" data-images="(\d+)">\s*<text[^>]*>([^<]*)<\/text>\s*<g class="bfr-bar"><rect [^>]*width="([\d.]+)"/g))
        .map((m) => [m[3].replace(/&amp;/g, '&'), Number(m[1]), Number(m[2]), Number(m[4])]);
      const want = {};
      groups.filter((g) => g.ivmod && g.ivmod.images > 0).forEach((g) => { want[key(g)] = [g.ivmod.critical_images, g.ivmod.images]; });
      const got = {};
      bars.forEach((b) => { got[b[0]] = [b[1], b[2]]; });
      check(name + ': a bar per group with the result\'s critical images and images', JSON.stringify(got) === JSON.stringify(
        Object.fromEntries(Object.keys(got).map((k) => [k, want[k]]))) && Object.keys(got).length === Object.keys(want).length,
        JSON.stringify(got) + ' vs ' + JSON.stringify(want));
      const scale = bars.filter((b) => b[1] > 0).map((b) => b[3] / (b[1] / b[2]));
      check(name + ': bar lengths in proportion to IVMOD', scale.length > 0 && Math.max(...scale) - Math.min(...scale) < 2, scale.join(' '));
    }
    check('a classification result has no IVMOD figure', !figs.figures.some((f) => /^ivmod/.test(f.name)));

    // --- a trial on an image, drawn by the daemon through the page's form ------
    check('the picture form is offered for a detection result', await page.locator('#picture-form').isVisible());
    await page.locator('#picture-trial').fill('4');
    await page.locator('#picture-image').fill('2');
    await page.locator('#picture-draw').click();
    await page.locator('#picture figure[data-name="trial"] img').waitFor({ timeout: LONG });
    const picW = await page.locator('#picture figure img').evaluate((i) => i.decode().then(() => i.naturalWidth, () => 0));
    check('the trial picture loads as an image', picW > 0, picW);
    const pic = await (await fetch(URL_ + '/v1/campaigns/' + sub.id + '/picture?trial=4&image=2', { headers: auth })).json();
    const count = (cls) => (pic.svg.match(new RegExp('<g class="' + cls + '"', 'g')) || []).length;
    // golden: PyTorch's detections of image 2 scoring over the default threshold (0.5)
    const detRef = JSON.parse(fs.readFileSync(path.join(FIX, 'onesample', 'onesample_det.ref.json'), 'utf8'));
    const wantGolden = detRef.golden[2].scores.filter((x) => x > 0.5).length;
    check('golden boxes drawn: PyTorch\'s ' + wantGolden, count('bfr-box-golden') === wantGolden, count('bfr-box-golden'));
    const capt = (pic.svg.match(/faulty: (\d+) detection/) || [])[1];
    check('faulty boxes drawn as the caption counts', Number(capt) === count('bfr-box-faulty'), capt + ' vs ' + count('bfr-box-faulty'));
    const status = async (q, id) => (await fetch(URL_ + '/v1/campaigns/' + (id || sub.id) + '/picture?' + q, { headers: auth })).status;
    check('a trial out of range is a 400', await status('trial=40&image=0') === 400);
    check('an image out of range is a 400', await status('trial=0&image=10') === 400);
    check('a malformed index is a 400', await status('trial=x&image=0') === 400);
    check('a classification campaign has no picture (422)', await status('trial=0&image=0', cid) === 422);
    // a refused trial: the browser logs the 400 it asked for, and only that
    const before = problems.length;
    await page.locator('#picture-trial').fill('40');
    await page.locator('#picture-draw').click();
    await page.locator('#picture p.bad').waitFor();
    check('the page says why a trial cannot be drawn', /out of range/.test(await page.locator('#picture p.bad').textContent()));
    const added = problems.splice(before);
    check('the refused trial logged only its 400', added.every((m) => /status of 400/.test(m)), added.join('; '));
    await page.screenshot({ path: path.join(OUT, 'ui-ivmod.png'), fullPage: true });

    // --- a second campaign, adaptive with stop targets it cannot meet: its
    // progress shows the estimates and half-widths the daemon's events carry;
    // then canceled -----------------------------------------------------------
    await specWith(page, { trials: 1000000, seed: 2, sampling: 'adaptive', stop: { margin: 0.0001, per_tensor_margin: 0.0001 } });
    await page.locator('#spec-submit').click();
    await page.locator('#campaign-list li[data-id]').nth(1).waitFor();
    const second = page.locator('#campaign-list li[data-id]').first();
    check('the new campaign is listed first', (await second.getAttribute('data-id')) !== cid);
    await second.locator('.progress-text').filter({ hasText: 'per tensor ±' }).waitFor({ timeout: LONG });
    const ivText = await second.locator('.progress-text').textContent();
    const sid = await second.getAttribute('data-id');
    const cur = await (await fetch(URL_ + '/v1/campaigns/' + sid, { headers: { Authorization: 'Bearer ' + TOKEN_A } })).json();
    const mm = ivText.match(/critical ([\d.]+)% \[([\d.]+), ([\d.]+)\], DUE ([\d.]+)% \[([\d.]+), ([\d.]+)\] · ±([\d.]+)%, per tensor ±([\d.]+)%/);
    check('progress shows the estimates with intervals and the half-widths', mm !== null, ivText);
    // their form: each interval holds its rate, and the overall half-width is the wider interval's half
    if (mm) {
      const v = mm.slice(1).map(Number);
      check('the intervals hold their rates', v[1] <= v[0] + 0.005 && v[0] <= v[2] + 0.005 && v[4] <= v[3] + 0.005 && v[3] <= v[5] + 0.005, ivText);
      check('the overall half-width is the wider interval\'s half', Math.abs(v[6] - Math.max(v[2] - v[1], v[5] - v[4]) / 2) <= 0.011, ivText);
      check('the daemon\'s progress carries the intervals', cur.progress && cur.progress.intervals && typeof cur.progress.intervals.half_width.per_tensor === 'number', JSON.stringify(cur.progress));
    }
    await second.getByRole('button', { name: /Cancel campaign/ }).click();
    await page.locator('#campaign-list li.state-canceled').waitFor({ timeout: LONG });
    check('the second campaign was canceled', true);

    // --- phone width ---------------------------------------------------------
    const phone = await newPage(browser, { width: 375, height: 812 }, 'phone', problems);
    await phone.page.goto(URL_ + '/');
    await phone.page.locator('#status').filter({ hasText: 'needs a token' }).waitFor();
    await signIn(phone.page, TOKEN_A);
    await phone.page.locator('#campaign-list li.state-succeeded').first().waitFor();
    const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth);
    check('no sideways scrolling at 375 px', overflow <= 375, overflow);
    await phone.page.locator('#campaigns-h').scrollIntoViewIfNeeded();
    await phone.page.screenshot({ path: path.join(OUT, 'ui-phone.png') });
    check('phone: no CSP violations', (await phone.page.evaluate(() => window.__csp)).length === 0);
    await phone.context.close();

    // --- the other tenant sees nothing of the first ---------------------------
    const bob = await newPage(browser, { width: 1280, height: 800 }, 'bob', problems);
    await bob.page.goto(URL_ + '/');
    await bob.page.locator('#status').filter({ hasText: 'needs a token' }).waitFor();
    await signIn(bob.page, TOKEN_B);
    check('bob sees no models, datasets or campaigns',
      (await bob.page.locator('#status').textContent()) === '0 models, 0 datasets, 0 campaigns.' &&
      (await bob.page.locator('li[data-id]').count()) === 0);
    const peek = await fetch(URL_ + '/v1/campaigns/' + cid + '/figures', { headers: { Authorization: 'Bearer ' + TOKEN_B } });
    check('bob cannot read alice\'s figures (404)', peek.status === 404, peek.status);
    check('bob: no CSP violations', (await bob.page.evaluate(() => window.__csp)).length === 0);
    await bob.context.close();

    // switching tenant in the same tab clears the first tenant's view
    await page.getByRole('button', { name: 'Forget' }).click();
    check('forgetting the token clears the lists', (await page.locator('li[data-id]').count()) === 0 &&
      await page.evaluate(() => sessionStorage.getItem('bitflip.token') === null));
    check('alice: no CSP violations', (await page.evaluate(() => window.__csp)).length === 0, await page.evaluate(() => window.__csp.join('; ')));
    await context.close();
  } finally {
    await browser.close();
  }
  check('no console errors, page errors or failed requests', problems.length === 0, '\n  ' + problems.join('\n  '));
  console.log('screenshots in ' + OUT);
  console.log(failures ? failures + ' checks failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.log('FAIL ' + (e && e.stack || e)); process.exit(1); });
