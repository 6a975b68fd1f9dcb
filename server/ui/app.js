/* bitflipd's web page: models, datasets, campaigns (live from their event
 * streams), a campaign's figures, and a form to submit one. Hand-written, no
 * framework: the page is small, and everything it shows is built with
 * createElement + textContent, never innerHTML, so no text from the daemon
 * (model names, error messages, tensor names) can become markup.
 *
 * The bearer token lives in sessionStorage (gone when the tab closes) and
 * travels only in the Authorization header. EventSource cannot send that
 * header, so event streams are read with fetch() and parsed by sse.js,
 * resuming with Last-Event-ID after a dropped connection. */
(function () {
  'use strict';

  var TOKEN_KEY = 'bitflip.token';
  /* a browser opens at most 6 connections to one origin over HTTP/1.1: keep
   * room for the page's own requests; other active campaigns are polled */
  var MAX_STREAMS = 3;
  var POLL_MS = 4000;

  var state = {
    auth: null,                 /* whether the daemon wants a token (GET /v1) */
    models: [], datasets: [], campaigns: [],
    streams: new Map(),         /* campaign id -> AbortController */
    rates: new Map(),           /* campaign id -> {t0, done0} for time left */
    figureUrls: [],
    final: new Map(),           /* campaign id -> its last progress (GET /v1/campaigns
                                   lists a finished campaign's as 0 trials done) */
    validate: null,             /* from the daemon's schema */
    shownResult: null,
    pollTimer: null
  };

  /* --- small helpers --------------------------------------------------- */

  function $(id) { return document.getElementById(id); }

  /* An element with properties (never innerHTML) and children (strings
   * become text nodes). */
  function el(tag, props, children) {
    var e = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        if (k === 'dataset') Object.keys(props.dataset).forEach(function (d) { e.dataset[d] = props.dataset[d]; });
        else if (k.indexOf('aria-') === 0 || k === 'role' || k === 'for') e.setAttribute(k, props[k]);
        else e[k] = props[k];
      });
    }
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  var intFmt = new Intl.NumberFormat('en-US');
  var pctFmt = new Intl.NumberFormat('en-US', {style: 'percent', maximumFractionDigits: 1});
  function fmtInt(n) { return intFmt.format(n); }
  function fmtPct(x) { return pctFmt.format(x); }
  function fmtBytes(n) {
    if (n < 1024) return fmtInt(n) + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1024 / 1024).toFixed(1) + ' MiB';
  }
  function fmtLeft(s) {
    if (!isFinite(s) || s < 0) return '';
    if (s < 60) return Math.max(1, Math.round(s)) + ' s left';
    if (s < 90 * 60) return Math.round(s / 60) + ' min left';
    return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min left';
  }
  function fmtTime(iso) {
    if (!iso) return '';
    var d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toLocaleString('en-GB', {dateStyle: 'medium', timeStyle: 'short'});
  }
  function shortId(id) { return String(id).slice(0, 12); }

  function say(msg, bad) {
    var s = $('status');
    s.textContent = msg;
    s.className = bad ? 'bad' : '';
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  function headers(extra) {
    var h = extra || {};
    if (token()) h.Authorization = 'Bearer ' + token();
    return h;
  }

  /* A problem+json reply as one line: its detail, and each error with its
   * pointer. */
  function problemText(p, status) {
    if (!p || typeof p !== 'object') return 'HTTP ' + status;
    var t = p.detail || p.title || ('HTTP ' + status);
    if (Array.isArray(p.errors) && p.errors.length) {
      t += ': ' + p.errors.map(function (e) { return (e.pointer || '/') + ' ' + e.detail; }).join('; ');
    }
    return t;
  }

  /* fetch against the daemon: JSON in, JSON (or null) out; throws an Error
   * with the problem's text and .status. */
  function api(method, path, body, extraHeaders) {
    var opts = {method: method, headers: headers(extraHeaders || {}), cache: 'no-store'};
    if (body !== undefined) opts.body = body;
    return fetch(path, opts).then(function (res) {
      var ct = res.headers.get('Content-Type') || '';
      var parse = ct.indexOf('json') >= 0 ? res.json().catch(function () { return null; }) : Promise.resolve(null);
      return parse.then(function (j) {
        if (!res.ok) {
          var err = new Error(problemText(j, res.status));
          err.status = res.status;
          err.problem = j;
          throw err;
        }
        return j;
      });
    });
  }

  function authProblem(e) {
    if (e && e.status === 401) {
      say('The daemon refused this token (' + e.message + '). Enter another.', true);
      stopAll();
      return true;
    }
    return false;
  }

  /* --- token ------------------------------------------------------------- */

  function signedIn() { return state.auth === false || !!token(); }

  function onToken(ev) {
    ev.preventDefault();
    var t = $('token').value.trim();
    $('token').value = '';
    if (!t) { say('Enter a bearer token (bft_...), from the operator\'s "bitflipd token create".', true); return; }
    sessionStorage.setItem(TOKEN_KEY, t);
    resetView();
    refreshAll();
  }

  function onForget() {
    sessionStorage.removeItem(TOKEN_KEY);
    resetView();
    say(state.auth ? 'Token forgotten. Enter a token to continue.' : 'Token forgotten.');
    if (!state.auth) refreshAll();
  }

  function resetView() {
    stopAll();
    state.models = []; state.datasets = []; state.campaigns = [];
    state.rates.clear(); state.final.clear();
    renderModels(); renderDatasets(); renderCampaigns(); fillPickers();
    hideResult();
    renderTokenState();
  }

  function renderTokenState() {
    var s = $('token-state');
    if (state.auth === false) s.textContent = 'This daemon needs no token (loopback, no tokens configured).';
    else s.textContent = token() ? 'A token is set for this tab.' : 'No token set.';
    $('token-forget').disabled = !token();
  }

  /* --- models and datasets ------------------------------------------- */

  function refreshItems(kind) {
    return api('GET', '/v1/' + kind + '?limit=1000').then(function (j) {
      state[kind] = j.items || [];
      if (kind === 'models') renderModels(); else renderDatasets();
      fillPickers();
    });
  }

  function surfaceTable(m) {
    var rows = (m.params || []).map(function (p) {
      return el('tr', null, [el('td', {className: 'name'}, [p.name]), el('td', null, ['[' + (p.shape || []).join(', ') + ']']),
        el('td', {className: 'num'}, [fmtInt(p.elements)]), el('td', null, [p.read_by_op || ''])]);
    });
    return el('div', {className: 'surface'}, [
      el('p', null, [fmtInt(m.param_elements || 0) + ' parameters, ' + fmtInt(m.param_bits || 0) + ' bits that a fault can flip; ' +
        fmtInt((m.layers || []).length) + ' layers (' + Object.keys(m.ops || {}).map(function (k) { return k + ' ' + m.ops[k]; }).join(', ') + ').']),
      el('table', null, [
        el('caption', null, ['Parameter tensors: the weight-fault sites']),
        el('thead', null, [el('tr', null, [el('th', {scope: 'col'}, ['Tensor']), el('th', {scope: 'col'}, ['Shape']),
          el('th', {scope: 'col', className: 'num'}, ['Elements']), el('th', {scope: 'col'}, ['Read by'])])]),
        el('tbody', null, rows)])]);
  }

  function renderModels() {
    var ul = $('model-list');
    clear(ul);
    if (!state.models.length) { ul.appendChild(el('li', {className: 'empty'}, [signedIn() ? 'No models yet: upload an ONNX file.' : 'Enter a token to see your models.'])); return; }
    state.models.forEach(function (m) {
      var details = el('details', null, [el('summary', null, ['Fault surface'])]);
      details.addEventListener('toggle', function () {
        if (!details.open || details.dataset.loaded) return;
        details.dataset.loaded = '1';
        api('GET', '/v1/models/' + encodeURIComponent(m.id)).then(function (full) {
          details.appendChild(surfaceTable(full));
        }).catch(function (e) { details.appendChild(el('p', {className: 'bad'}, [e.message])); });
      });
      ul.appendChild(el('li', {dataset: {id: m.id}}, [
        el('span', {className: 'title'}, [m.name || shortId(m.id)]),
        el('span', {className: 'meta'}, [shortId(m.id) + ' · ' + fmtBytes(m.size) + ' · ' + fmtInt(m.nodes || 0) + ' nodes · ' +
          fmtInt(m.param_elements || 0) + ' parameters' + (m.corrupt ? ' · CORRUPT' : '')]),
        details]));
    });
  }

  function renderDatasets() {
    var ul = $('dataset-list');
    clear(ul);
    if (!state.datasets.length) { ul.appendChild(el('li', {className: 'empty'}, [signedIn() ? 'No datasets yet: upload a safetensors eval set.' : 'Enter a token to see your datasets.'])); return; }
    state.datasets.forEach(function (d) {
      var tensors = (d.tensors || []).map(function (t) { return t.name + ' [' + (t.shape || []).join(', ') + ']'; }).join(', ');
      ul.appendChild(el('li', {dataset: {id: d.id}}, [
        el('span', {className: 'title'}, [d.name || shortId(d.id)]),
        el('span', {className: 'meta'}, [shortId(d.id) + ' · ' + fmtBytes(d.size) + ' · ' + fmtInt(d.samples || 0) + ' samples' +
          (d.labels ? ', labelled' : ', no labels') + (tensors ? ' · ' + tensors : '')])]));
    });
  }

  function onUpload(kind, input, ev) {
    ev.preventDefault();
    var f = input.files && input.files[0];
    if (!f) { say('Choose a file to upload first.', true); return; }
    say('Uploading ' + f.name + ' (' + fmtBytes(f.size) + ')...');
    api('POST', '/v1/' + kind + '?name=' + encodeURIComponent(f.name), f, {'Content-Type': 'application/octet-stream'})
      .then(function (j) {
        say('Uploaded ' + f.name + ' as ' + shortId(j.id) + '.');
        input.value = '';
        return refreshItems(kind);
      })
      .catch(function (e) { if (!authProblem(e)) say('Upload of ' + f.name + ' refused: ' + e.message, true); });
  }

  /* --- the campaign form ------------------------------------------------- */

  function fillPicker(sel, items, what) {
    var keep = sel.value;
    clear(sel);
    if (!items.length) sel.appendChild(el('option', {value: ''}, ['(upload a ' + what + ' first)']));
    items.forEach(function (it) {
      sel.appendChild(el('option', {value: it.id}, [(it.name || '') + ' (' + shortId(it.id) + ')']));
    });
    if (items.some(function (it) { return it.id === keep; })) sel.value = keep;
  }

  function fillPickers() {
    fillPicker($('spec-model'), state.models, 'model');
    fillPicker($('spec-dataset'), state.datasets, 'dataset');
    syncSpecFromPickers();
  }

  function parseSpec() {
    try { return {doc: JSON.parse($('spec').value)}; } catch (e) { return {error: e.message}; }
  }

  /* The pickers write the spec's "model" and "dataset" fields. */
  function syncSpecFromPickers() {
    var p = parseSpec();
    if (p.error || !p.doc || typeof p.doc !== 'object' || Array.isArray(p.doc)) { checkSpec(); return; }
    var m = $('spec-model').value, d = $('spec-dataset').value;
    if (m) p.doc.model = m;
    if (d) p.doc.dataset = d;
    $('spec').value = JSON.stringify(p.doc, null, 2);
    checkSpec();
  }

  function showSpecErrors(list) {
    var ul = $('spec-errors');
    clear(ul);
    list.forEach(function (e) {
      ul.appendChild(el('li', null, [el('code', null, [e.pointer || '/']), ' ' + e.message]));
    });
  }

  /* Returns the errors (empty when the spec may be sent). */
  function checkSpec() {
    var p = parseSpec(), errs;
    if (p.error) errs = [{pointer: '', message: 'not JSON: ' + p.error}];
    else if (state.validate) errs = state.validate(p.doc);
    else errs = [];
    showSpecErrors(errs);
    $('spec').setAttribute('aria-invalid', errs.length ? 'true' : 'false');
    $('spec-submit').disabled = errs.length > 0 || !signedIn();
    return errs;
  }

  function onSubmitCampaign(ev) {
    ev.preventDefault();
    if (checkSpec().length) return;
    var key = (self.crypto && crypto.randomUUID) ? crypto.randomUUID() : String(Date.now()) + Math.random();
    $('spec-submit').disabled = true;
    api('POST', '/v1/campaigns', $('spec').value, {'Content-Type': 'application/json', 'Idempotency-Key': key})
      .then(function (c) {
        say('Campaign ' + c.id + ' queued: ' + fmtInt(c.progress ? c.progress.trials_planned : 0) + ' trials.');
        return refreshCampaigns();
      })
      .catch(function (e) {
        if (authProblem(e)) return;
        var errs = (e.problem && Array.isArray(e.problem.errors)) ? e.problem.errors.map(function (x) {
          return {pointer: x.pointer, message: x.detail};
        }) : [];
        showSpecErrors(errs.length ? errs : [{pointer: '', message: e.message}]);
        say('The daemon refused the campaign: ' + e.message, true);
      })
      .then(function () { $('spec-submit').disabled = checkSpec().length > 0; });
  }

  /* --- campaigns ----------------------------------------------------------- */

  function active(c) { return c.state === 'queued' || c.state === 'running'; }

  function refreshCampaigns() {
    return api('GET', '/v1/campaigns?limit=1000').then(function (j) {
      var items = j.items || [];
      items.reverse();   /* newest first */
      items.forEach(function (c) {
        if (active(c)) return;
        /* the listing has a finished campaign's trials from its result;
         * a canceled one has none, but the page may have watched it */
        if (state.final.has(c.id) && !(c.progress || {}).trials_done) c.progress = state.final.get(c.id);
      });
      state.campaigns = items;
      renderCampaigns();
      followActive();
    });
  }

  function itemName(list, id) {
    var it = list.find(function (x) { return x.id === id; });
    return it && it.name ? it.name : shortId(id);
  }

  function progressText(c) {
    var p = c.progress || {}, done = p.trials_done || 0, planned = p.trials_planned || 0;
    var t = fmtInt(done) + ' of ' + fmtInt(planned) + ' trials (' + fmtPct(planned ? done / planned : 0) + ')';
    var r = state.rates.get(c.id);
    if (c.state === 'running' && r) {
      var secs = (Date.now() - r.t0) / 1000;
      if (secs > 1 && done > r.done0) t += ', ' + fmtLeft((planned - done) / ((done - r.done0) / secs));
    }
    var o = p.outcomes, iv = p.intervals;
    if (iv && iv.critical && iv.due && iv.half_width) {
      /* a one-chunk campaign: the estimates and how far the intervals are
       * from the stop targets (docs/SERVICE.md) */
      var hw = iv.half_width;
      t += ' · critical ' + fmtEst(iv.critical) + ', DUE ' + fmtEst(iv.due) + ' · ±' + fmtPct2(hw.overall);
      if (typeof hw.per_tensor === 'number') t += ', per tensor ±' + fmtPct2(hw.per_tensor);
      if (typeof hw.per_bit === 'number') t += ', per bit ±' + fmtPct2(hw.per_bit);
    } else if (o && done) {
      t += ' · critical ' + fmtPct((o.critical || 0) / done) + ', DUE ' + fmtPct((o.due || 0) / done);
    }
    return t;
  }
  /* a rate with its interval, "4.61% [4.22, 5.03]"; two decimals: the
   * half-widths a stop rule aims at are tenths of a percent */
  function fmtPct2(x) { return typeof x === 'number' ? (100 * x).toFixed(2) + '%' : '–'; }
  function fmtEst(e) {
    if (typeof e.rate !== 'number' || !e.ci || typeof e.ci[0] !== 'number') return '–';
    return fmtPct2(e.rate) + ' [' + (100 * e.ci[0]).toFixed(2) + ', ' + (100 * e.ci[1]).toFixed(2) + ']';
  }

  function updateCampaignItem(li, c) {
    li.className = 'campaign state-' + c.state;
    li.querySelector('.state').textContent = c.state + (c.verdict ? ' · gate ' + c.verdict : '');
    var p = c.progress || {};
    var bar = li.querySelector('progress');
    bar.max = Math.max(1, p.trials_planned || 0);
    bar.value = Math.min(bar.max, p.trials_done || 0);
    li.querySelector('.progress-text').textContent = progressText(c);
    li.querySelector('.error').textContent = c.error || '';
    li.querySelector('.cancel').hidden = !active(c);
    li.querySelector('.show').hidden = c.state !== 'succeeded';
  }

  function campaignItem(c) {
    var barId = 'bar-' + c.id;
    var cancel = el('button', {type: 'button', className: 'cancel'}, ['Cancel']);
    cancel.setAttribute('aria-label', 'Cancel campaign ' + c.id);
    cancel.addEventListener('click', function () { onCancel(c.id, cancel); });
    var show = el('button', {type: 'button', className: 'show'}, ['Show result']);
    show.setAttribute('aria-label', 'Show the result of campaign ' + c.id);
    show.addEventListener('click', function () { showResult(c.id); });
    /* faults as a list of groups (docs/CAMPAIGNS.md): group 0's, and how many more */
    var spec = c.spec || {}, groups = Array.isArray(spec.faults) ? spec.faults : [spec.faults || {}], f = groups[0] || {};
    var what = (f.model || 'bitflip') + ' faults in ' + (f.target || 'weights') + ' (' + (f.representation || 'fp32') + '), ' +
      (groups.length > 1 ? '+ ' + (groups.length - 1) + ' fault group on activations, ' : '') +
      (typeof spec.sampling === 'string' ? spec.sampling : spec.sampling ? 'listed' : 'uniform') + ' sampling';
    return el('li', {dataset: {id: c.id}}, [
      el('div', {className: 'row'}, [el('span', {className: 'title'}, [c.id]), el('span', {className: 'state'}, [])]),
      el('span', {className: 'meta'}, [itemName(state.models, c.model) + ' on ' + itemName(state.datasets, c.dataset) + ' · ' + what +
        ' · created ' + fmtTime(c.created)]),
      el('label', {'for': barId, className: 'visually-hidden'}, ['Progress of ' + c.id]),
      el('progress', {id: barId, max: 1, value: 0}, []),
      el('span', {className: 'progress-text', 'aria-live': 'off'}, []),
      el('span', {className: 'error bad'}, []),
      el('div', {className: 'row buttons'}, [show, cancel])]);
  }

  /* Updates the list in place, keyed by id, so that focus and scroll stay
   * where they are while progress moves. */
  function renderCampaigns() {
    var ul = $('campaign-list');
    var byId = new Map();
    Array.prototype.forEach.call(ul.children, function (li) { if (li.dataset.id) byId.set(li.dataset.id, li); });
    var want = state.campaigns.map(function (c) {
      var li = byId.get(c.id) || campaignItem(c);
      updateCampaignItem(li, c);
      return li;
    });
    clear(ul);
    if (!want.length) ul.appendChild(el('li', {className: 'empty'}, [signedIn() ? 'No campaigns yet: submit one with the form.' : 'Enter a token to see your campaigns.']));
    want.forEach(function (li) { ul.appendChild(li); });
  }

  function campaignById(id) { return state.campaigns.find(function (c) { return c.id === id; }); }

  function onCancel(id, button) {
    button.disabled = true;
    api('POST', '/v1/campaigns/' + encodeURIComponent(id) + '/cancel').then(function (c) {
      say('Campaign ' + id + ' is ' + c.state + '.');
    }).catch(function (e) {
      if (!authProblem(e)) say('Cancel of ' + id + ': ' + e.message, true);
    }).then(function () { button.disabled = false; return refreshCampaigns(); }).catch(function () {});
  }

  /* --- event streams (sse.js: fetch + ReadableStream, since EventSource
   * cannot send the Authorization header) ------------------------------------ */

  function onEvent(id, type, data) {
    var c = campaignById(id), j;
    if (!c) return;
    try { j = JSON.parse(data); } catch (e) { return; }
    if (type === 'progress') {
      c.progress = j;
      state.final.set(id, j);
      if (c.state === 'queued' && j.trials_done > 0) c.state = 'running';
      if (!state.rates.has(id) && c.state === 'running') state.rates.set(id, {t0: Date.now(), done0: j.trials_done || 0});
    } else if (type === 'state' || type === 'end') {
      c.state = j.state;
      if (j.verdict) c.verdict = j.verdict;
      if (j.error) c.error = j.error;
      if (c.state === 'running' && !state.rates.has(id)) state.rates.set(id, {t0: Date.now(), done0: (c.progress || {}).trials_done || 0});
    }
    var li = document.querySelector('#campaign-list li[data-id="' + id + '"]');
    if (li) updateCampaignItem(li, c);
    if (type === 'end') {
      say('Campaign ' + id + ' ' + j.state + (j.error ? ': ' + j.error : '') + '.');
      refreshCampaigns().catch(function () {});
    }
  }

  /* Reads one stream until its `end` event (sse.js reconnects with
   * Last-Event-ID when the connection drops). */
  function follow(id) {
    var ctrl = new AbortController();
    state.streams.set(id, ctrl);
    BitflipSSE.follow('/v1/campaigns/' + encodeURIComponent(id) + '/events', {
      headers: function () { return headers({}); },
      signal: ctrl.signal,
      onEvent: function (ev) { onEvent(id, ev.type || 'message', ev.data); }
    }).then(function () {
      if (state.streams.get(id) === ctrl) state.streams.delete(id);
      if (!ctrl.signal.aborted) followActive();
    });
  }

  /* Streams for up to MAX_STREAMS active campaigns; a poll for the rest. */
  function followActive() {
    state.campaigns.forEach(function (c) {
      if (active(c) && !state.streams.has(c.id) && state.streams.size < MAX_STREAMS) follow(c.id);
    });
    var unfollowed = state.campaigns.some(function (c) { return active(c) && !state.streams.has(c.id); });
    if (unfollowed && !state.pollTimer) {
      state.pollTimer = setTimeout(function () {
        state.pollTimer = null;
        if (signedIn()) refreshCampaigns().catch(function () {});
      }, POLL_MS);
    }
  }

  function stopAll() {
    state.streams.forEach(function (ctrl) { ctrl.abort(); });
    state.streams.clear();
    if (state.pollTimer) { clearTimeout(state.pollTimer); state.pollTimer = null; }
  }

  /* --- a campaign's result: headline and figures ------------------------ */

  /* a figure as an <img> from a blob: URL, never in the DOM: an <img> runs
   * no script and loads nothing, whatever the document holds */
  function figureEl(f) {
    var url = URL.createObjectURL(new Blob([f.svg || ''], {type: 'image/svg+xml'}));
    state.figureUrls.push(url);
    return el('figure', {dataset: {name: f.name || ''}}, [
      el('img', {src: url, alt: f.alt || f.title || 'figure', loading: 'lazy'}, []),
      el('figcaption', null, [f.title || ''])]);
  }

  /* a detection or segmentation result: trial K on image I, drawn by the
   * daemon (it runs the trial again) */
  function drawPicture(ev) {
    ev.preventDefault();
    var id = state.shownResult;
    if (!id) return;
    clear($('picture'));
    $('picture').appendChild(el('p', null, ['Running the trial again...']));
    api('GET', '/v1/campaigns/' + encodeURIComponent(id) + '/picture?trial=' + encodeURIComponent($('picture-trial').value) +
        '&image=' + encodeURIComponent($('picture-image').value)).then(function (f) {
      if (state.shownResult !== id) return;
      clear($('picture'));
      $('picture').appendChild(figureEl(f));
    }).catch(function (e) {
      if (authProblem(e)) return;
      clear($('picture'));
      $('picture').appendChild(el('p', {className: 'bad'}, ['Cannot draw it: ' + e.message]));
    });
  }

  function hideResult() {
    state.figureUrls.forEach(function (u) { URL.revokeObjectURL(u); });
    state.figureUrls = [];
    state.shownResult = null;
    $('result').hidden = true;
    $('picture-form').hidden = true;
    clear($('picture'));
    clear($('figures'));
    $('headline').textContent = '';
  }

  function showResult(id) {
    api('GET', '/v1/campaigns/' + encodeURIComponent(id) + '/figures').then(function (j) {
      hideResult();
      state.shownResult = id;
      $('result-h').textContent = 'Result of ' + id;
      $('headline').textContent = j.headline || '';
      (j.figures || []).forEach(function (f) { $('figures').appendChild(figureEl(f)); });
      /* IVMOD figures: a detection or segmentation result, whose trials can be drawn */
      $('picture-form').hidden = !(j.figures || []).some(function (f) { return /^ivmod_/.test(f.name || ''); });
      if (!(j.figures || []).length) $('figures').appendChild(el('p', null, ['This result has no figures to draw.']));
      $('result').hidden = false;
      $('result-h').focus();
    }).catch(function (e) { if (!authProblem(e)) say('Figures of ' + id + ': ' + e.message, true); });
  }

  /* --- start ------------------------------------------------------------------ */

  function refreshAll() {
    renderTokenState();
    if (!signedIn()) {
      say('This daemon needs a token: enter yours above.');
      renderModels(); renderDatasets(); renderCampaigns(); checkSpec();
      return;
    }
    say('Loading...');
    Promise.all([refreshItems('models'), refreshItems('datasets')])
      .then(refreshCampaigns)
      .then(function () {
        say(fmtInt(state.models.length) + ' models, ' + fmtInt(state.datasets.length) + ' datasets, ' +
          fmtInt(state.campaigns.length) + ' campaigns.');
        checkSpec();
      })
      .catch(function (e) { if (!authProblem(e)) say('Cannot reach the daemon: ' + e.message, true); });
  }

  function start() {
    $('token-form').addEventListener('submit', onToken);
    $('token-forget').addEventListener('click', onForget);
    $('model-upload').addEventListener('submit', onUpload.bind(null, 'models', $('model-file')));
    $('dataset-upload').addEventListener('submit', onUpload.bind(null, 'datasets', $('dataset-file')));
    $('campaign-form').addEventListener('submit', onSubmitCampaign);
    $('spec-model').addEventListener('change', syncSpecFromPickers);
    $('spec-dataset').addEventListener('change', syncSpecFromPickers);
    var timer = null;
    $('spec').addEventListener('input', function () { clearTimeout(timer); timer = setTimeout(checkSpec, 200); });
    $('result-close').addEventListener('click', hideResult);
    $('picture-form').addEventListener('submit', drawPicture);
    /* the time left moves between events too */
    setInterval(function () {
      state.campaigns.forEach(function (c) {
        if (c.state !== 'running') return;
        var li = document.querySelector('#campaign-list li[data-id="' + c.id + '"]');
        if (li) li.querySelector('.progress-text').textContent = progressText(c);
      });
    }, 1000);

    Promise.all([api('GET', '/v1'), api('GET', '/v1/campaign.schema.json')]).then(function (r) {
      state.auth = !!r[0].auth;
      try {
        state.validate = BitflipSchema.compile(r[1]);
        $('schema-state').textContent = 'Checked as you type against the daemon\'s schema (/v1/campaign.schema.json).';
      } catch (e) {
        /* a schema past what validate.js knows: the daemon still checks */
        $('schema-state').textContent = 'The daemon\'s schema cannot be checked here (' + e.message + '); the daemon checks on submit.';
      }
      $('version').textContent = 'v' + r[0].version;
      refreshAll();
    }).catch(function (e) { say('Cannot reach the daemon: ' + e.message, true); });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
