// The page's event-stream reader (server/ui/sse.js) in node, against events
// written out by hand:
// - the parser, on a stream using every rule the daemon's events and the
//   WHATWG format allow (comments, CRLF / LF / CR, multi-line data, fields
//   without a colon or a space, unknown fields, events without data), fed
//   whole, split in two at every offset, and one character at a time;
//   then on random junk, which must never throw;
// - follow(), on a fake fetch: a connection dropped mid-event, a 503, a
//   network error, then the end: it must reconnect with the last event's
//   Last-Event-ID each time, back off 0.5, 1, 2 s, deliver every whole event
//   once and the half one never; stop at once on a 4xx and when aborted.
//   node sse_check.js SSE.js
'use strict';
const path = require('path');
const { Parser, follow } = require(path.resolve(process.argv[2]));

let failures = 0;
function check(name, cond, detail) {
  if (cond) console.log('ok   ' + name);
  else { failures++; console.log('FAIL ' + name + (detail !== undefined ? ': ' + detail : '')); }
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const STREAM =
  ': heartbeat\r\n\r\n' +
  'id: 3-1\r\nevent: state\r\ndata: {"state":"running"}\r\n\r\n' +
  'id: 3-2\nevent: progress\ndata: {"trials_done":256,\ndata:  "x":1}\n\n' +
  'event: progress\rdata:no-space\rretry: 10\rfoo: bar\r\r' +
  'id: 3-4\nevent: nothing\n\n' +
  'data\n\n' +
  ':comment: with colons\nevent: end\ndata: {"state":"succeeded"}\nid: 3-5\n\n' +
  'event: progress\ndata: never finished';
const WANT = [
  { type: 'state', data: '{"state":"running"}', id: '3-1' },
  { type: 'progress', data: '{"trials_done":256,\n "x":1}', id: '3-2' },
  { type: 'progress', data: 'no-space', id: '3-2' },
  { type: null, data: '', id: '3-4' },
  { type: 'end', data: '{"state":"succeeded"}', id: '3-5' },
];

function feed(chunks) {
  const p = new Parser();
  let out = [];
  for (const c of chunks) out = out.concat(p.push(c));
  return out;
}

check('parser: whole stream', same(feed([STREAM]), WANT), JSON.stringify(feed([STREAM])));
let splitBad = -1;
for (let i = 0; i <= STREAM.length; i++) {
  if (!same(feed([STREAM.slice(0, i), STREAM.slice(i)]), WANT)) { splitBad = i; break; }
}
check('parser: split in two at every offset', splitBad < 0, 'differs when split at ' + splitBad);
check('parser: one character at a time', same(feed(STREAM.split('')), WANT));

// junk: no exception, only well-formed events
let seed = 20261126;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
const ALPHABET = ['\n', '\r', '\r\n', ':', ' ', 'data', 'id', 'event', 'x', '\0', '\u00e9', '{}', 'retry'];
let junkBad = null;
for (let t = 0; t < 2000 && !junkBad; t++) {
  const chunks = [];
  for (let k = rnd(20); k > 0; k--) {
    let s = '';
    for (let j = rnd(12); j > 0; j--) s += ALPHABET[rnd(ALPHABET.length)];
    chunks.push(s);
  }
  try {
    const evs = feed(chunks);
    if (!evs.every((e) => typeof e.data === 'string' && (e.id === null || typeof e.id === 'string'))) junkBad = JSON.stringify(chunks);
  } catch (e) { junkBad = e.message + ' on ' + JSON.stringify(chunks); }
}
check('parser: 2000 junk streams, no exception, well-formed events', !junkBad, junkBad);

// --- follow(): reconnection --------------------------------------------------
const enc = new TextEncoder();
// one part per read, then the end (or, with `error`, a reset: error() in
// start would discard what is still queued)
function body(parts, error) {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i < parts.length) c.enqueue(enc.encode(parts[i++]));
      else if (error) c.error(new Error('connection reset'));
      else c.close();
    },
  });
}
const resp = (status, parts, error) => ({ status, ok: status >= 200 && status < 300, body: parts ? body(parts, error) : null });

async function reconnects() {
  const calls = [], waits = [], events = [];
  const script = [
    () => resp(200, ['id: 7-1\nevent: progress\ndata: {"n":1}\n\nid: 7-2\nev', 'ent: progress\ndata: {"n":2}\n\nevent: progress\ndata: half']),
    () => resp(503, []),
    () => { throw new TypeError('Failed to fetch'); },
    () => resp(200, ['id: 7-3\nevent: progress\ndata: {"n":3}\n\n', 'event: prog'], true),
    () => resp(200, [': heartbeat\n\nid: 7-4\nevent: end\ndata: {"state":"succeeded"}\n\n', 'id: 7-5\nevent: progress\ndata: {}\n\n']),
  ];
  const why = await follow('/v1/campaigns/c1/events', {
    headers: () => ({ Authorization: 'Bearer bft_x' }),
    onEvent: (e) => events.push(e.type + ' ' + e.data),
    wait: (ms) => { waits.push(ms); return Promise.resolve(); },
    fetch: async (url, opts) => {
      calls.push({ url, h: opts.headers });
      if (calls.length > script.length) throw new Error('too many connections');
      return script[calls.length - 1]();
    },
  });
  check('follow: stops at the end event', why === 'end', why);
  check('follow: every whole event once, half ones never',
    same(events, ['progress {"n":1}', 'progress {"n":2}', 'progress {"n":3}', 'end {"state":"succeeded"}']), JSON.stringify(events));
  check('follow: five connections', calls.length === 5, calls.length);
  check('follow: first without Last-Event-ID', !('Last-Event-ID' in calls[0].h));
  check('follow: then with the last whole event\'s id',
    same(calls.slice(1).map((c) => c.h['Last-Event-ID']), ['7-2', '7-2', '7-2', '7-3']), JSON.stringify(calls.map((c) => c.h['Last-Event-ID'])));
  check('follow: token and Accept on every connection',
    calls.every((c) => c.h.Authorization === 'Bearer bft_x' && c.h.Accept === 'text/event-stream'));
  check('follow: backs off 0.5, 1, 2 s, and again from 0.5 s after a good connection',
    same(waits, [500, 1000, 2000, 500]), JSON.stringify(waits));
}

async function stops() {
  let n = 0;
  const why = await follow('/e', { onEvent: () => {}, wait: () => Promise.resolve(), fetch: async () => { n++; return resp(404, []); } });
  check('follow: a 4xx ends it, no retry', why === 'status 404' && n === 1, why + ' after ' + n);
  const ctrl = new AbortController();
  n = 0;
  const why2 = await follow('/e', {
    onEvent: () => {}, signal: ctrl.signal, wait: () => Promise.resolve(),
    fetch: async () => { n++; ctrl.abort(); throw new DOMException('aborted', 'AbortError'); },
  });
  check('follow: an abort ends it, no retry', why2 === 'aborted' && n === 1, why2 + ' after ' + n);
}

reconnects().then(stops).then(() => {
  console.log(failures ? failures + ' checks failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
}, (e) => { console.log('FAIL ' + (e && e.stack || e)); process.exit(1); });
