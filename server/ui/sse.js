/* Server-Sent Events over fetch(), for the page's live progress. The
 * browser's EventSource cannot send an Authorization header, and the daemon
 * wants the bearer token on every request, so the stream is read with
 * fetch() + ReadableStream and parsed here, following the WHATWG rules the
 * daemon's events use (fields id, event, data; comments; \r\n, \n or \r line
 * ends, which may be split anywhere between chunks). After a dropped
 * connection it reconnects with Last-Event-ID, waiting longer each time, and
 * the daemon resumes after that event. tests/ui/sse_check.js tests both
 * halves in node. */
(function (root) {
  'use strict';

  /* Text in, complete events out: {type, data, id} (type null: "message"). */
  function Parser() {
    this.buf = '';
    this.ev = {type: null, data: null, id: null};
    this.lastId = null;
  }

  Parser.prototype.push = function (text) {
    var out = [], m;
    this.buf += text;
    /* a lone \r at the end may be half of \r\n: wait for more */
    while ((m = /\r\n|\n|\r(?!$)/.exec(this.buf))) {
      this.line(this.buf.slice(0, m.index), out);
      this.buf = this.buf.slice(m.index + m[0].length);
    }
    return out;
  };

  Parser.prototype.line = function (l, out) {
    var ev = this.ev;
    if (l === '') {
      if (ev.id !== null) this.lastId = ev.id;
      if (ev.data !== null) out.push({type: ev.type, data: ev.data, id: this.lastId});
      this.ev = {type: null, data: null, id: null};
      return;
    }
    if (l[0] === ':') return;   /* a comment: the daemon's heartbeats */
    var i = l.indexOf(':'), field = i < 0 ? l : l.slice(0, i), value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') ev.type = value;
    else if (field === 'data') ev.data = ev.data === null ? value : ev.data + '\n' + value;
    else if (field === 'id' && value.indexOf('\0') < 0) ev.id = value;
    /* retry and unknown fields: ignored (the backoff is ours) */
  };

  /* Follows url until an event of type `end` (or a 4xx, or opts.signal
   * aborts), reconnecting with Last-Event-ID. opts: headers() -> object,
   * onEvent(ev), signal, fetch (default: the global), wait(ms) -> Promise.
   * Resolves with why it stopped: 'end', 'status NNN' or 'aborted'. */
  function follow(url, opts) {
    var parser = new Parser(), backoff = 500;
    var doFetch = opts.fetch || function (u, o) { return fetch(u, o); };
    var wait = opts.wait || function (ms) { return new Promise(function (r) { setTimeout(r, ms); }); };

    function once() {
      var h = opts.headers ? opts.headers() : {};
      h.Accept = 'text/event-stream';
      if (parser.lastId !== null) h['Last-Event-ID'] = parser.lastId;
      parser = resume(parser);
      var ended = null;
      return doFetch(url, {headers: h, signal: opts.signal, cache: 'no-store'}).then(function (res) {
        if (res.status >= 400 && res.status < 500) { ended = 'status ' + res.status; return; }
        if (!res.ok || !res.body) return;
        backoff = 500;
        var reader = res.body.getReader(), dec = new TextDecoder();
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) return;
            var evs = parser.push(dec.decode(r.value, {stream: true}));
            for (var i = 0; i < evs.length; i++) {
              opts.onEvent(evs[i]);
              if (evs[i].type === 'end') { ended = 'end'; reader.cancel().catch(function () {}); return; }
            }
            return pump();
          });
        }
        return pump();
      }).catch(function () { /* a dropped connection: try again below */ }).then(function () {
        if (opts.signal && opts.signal.aborted) return 'aborted';
        if (ended) return ended;
        var ms = backoff;
        backoff = Math.min(backoff * 2, 10000);
        return wait(ms).then(once);
      });
    }
    return once();
  }

  /* A new connection starts a new event (half an event from a dropped one
   * is dropped) but keeps the last id. */
  function resume(p) {
    var n = new Parser();
    n.lastId = p.lastId;
    return n;
  }

  var api = {Parser: Parser, follow: follow};
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.BitflipSSE = api;
})(this);
