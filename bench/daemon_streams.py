"""bitflipd under load (bench/daemon_bench.py): the event-stream clients and
their checks."""
import hashlib
import os
import selectors
import socket
import statistics
import threading
import time
from daemon_proc import pct


# ---------------------------------------------------------------- event streams


class StreamClient:
    __slots__ = ("i", "sock", "req", "sent", "buf", "state", "status", "chunked", "chunk_left",
                 "line", "ev", "events", "heartbeats", "t_open", "t_headers", "t_end", "error",
                 "ended", "closed")

    def __init__(self, i, req):
        self.i, self.req, self.sent = i, req, 0
        self.buf = b""
        self.state = "connect"
        self.status = None
        self.chunked = False
        self.chunk_left = None    # bytes left in the current chunk; None: a size line is next
        self.line = b""
        self.ev = {}
        self.events = []          # (t, id, type, data)
        self.heartbeats = []      # t
        self.t_open = time.time()
        self.t_headers = self.t_end = None
        self.error = None
        self.ended = False        # got the `end` event
        self.closed = False       # the response (or the connection) ended

    # -- HTTP framing
    def feed(self, data, now):
        self.buf += data
        while True:
            if self.state == "headers":
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                head, self.buf = self.buf[:i].decode("latin-1"), self.buf[i + 4:]
                lines = head.split("\r\n")
                try:
                    self.status = int(lines[0].split()[1])
                except (IndexError, ValueError):
                    self.status = -1
                hdr = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
                self.chunked = "chunked" in hdr.get("transfer-encoding", "").lower()
                self.t_headers = now
                self.state = "body"
                if self.status != 200:
                    self.error = f"HTTP {self.status}"
            elif self.state != "body":
                return
            elif not self.chunked:
                self.sse(self.buf, now)
                self.buf = b""
                return
            elif self.chunk_left is None:          # a chunk-size line
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2:]
                if size == 0:                      # the last chunk: the response is over
                    self.closed, self.t_end, self.state = True, now, "done"
                    return
                self.chunk_left = size
            elif self.chunk_left > 0:              # chunk data
                if not self.buf:
                    return
                take = self.buf[:self.chunk_left]
                self.buf = self.buf[len(take):]
                self.chunk_left -= len(take)
                self.sse(take, now)
            else:                                  # the CRLF after a chunk's data
                if len(self.buf) < 2:
                    return
                self.buf = self.buf[2:]
                self.chunk_left = None

    # -- Server-Sent Events
    def sse(self, data, now):
        self.line += data
        while True:
            i = self.line.find(b"\n")
            if i < 0:
                return
            raw, self.line = self.line[:i], self.line[i + 1:]
            s = raw.decode("utf-8", "replace").rstrip("\r")
            if s == "":
                if self.ev:
                    e = self.ev
                    self.ev = {}
                    self.events.append((now, e.get("id"), e.get("event", "message"), e.get("data", "")))
                    if e.get("event") == "end":
                        self.ended = True
                continue
            if s.startswith(":"):
                self.heartbeats.append(now)
                continue
            k, _, v = s.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "data":
                self.ev["data"] = self.ev["data"] + "\n" + v if "data" in self.ev else v
            else:
                self.ev[k] = v


class StreamGroup(threading.Thread):
    """n clients on one event stream, driven by one selector in a thread of its own."""

    def __init__(self, port, path, n, token=None, label=""):
        super().__init__(daemon=True)
        self.port, self.path, self.n, self.label = port, path, n, label
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
                    f"Cache-Control: no-cache\r\n{auth}\r\n").encode()
        self.clients = []
        self.stop_flag = threading.Event()
        self.all_open = threading.Event()
        self.t_all_open = None
        self.cpu_s = 0.0

    def run(self):
        t_cpu = time.thread_time()
        sel = selectors.DefaultSelector()
        for i in range(self.n):
            c = StreamClient(i, self.req)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.sock = s
            rc = s.connect_ex(("127.0.0.1", self.port))
            if rc not in (0, 115):   # EINPROGRESS
                c.error, c.closed = f"connect: {os.strerror(rc)}", True
                s.close()
            else:
                sel.register(s, selectors.EVENT_WRITE, c)
            self.clients.append(c)
        while not self.stop_flag.is_set():
            if not self.all_open.is_set() and all(c.t_headers or c.closed for c in self.clients):
                self.t_all_open = time.time()
                self.all_open.set()
            if all(c.closed for c in self.clients):
                break
            for key, mask in sel.select(0.2):
                c = key.data
                now = time.time()
                try:
                    if c.state == "connect":
                        err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            raise OSError(err, os.strerror(err))
                        c.state = "send"
                    if c.state == "send":
                        c.sent += c.sock.send(c.req[c.sent:])
                        if c.sent == len(c.req):
                            c.state = "headers"
                            sel.modify(c.sock, selectors.EVENT_READ, c)
                        continue
                    data = c.sock.recv(262144)
                    if not data:
                        if not c.closed:
                            c.closed, c.t_end = True, now
                            if not c.ended:
                                c.error = c.error or "connection closed before the end event"
                        sel.unregister(c.sock)
                        c.sock.close()
                        continue
                    c.feed(data, now)
                    if c.closed:    # the last chunk: done with this client
                        sel.unregister(c.sock)
                        c.sock.close()
                except (OSError, ValueError) as e:
                    c.error, c.closed, c.t_end = f"{type(e).__name__}: {e}", True, now
                    try:
                        sel.unregister(c.sock)
                    except (KeyError, ValueError):
                        pass
                    c.sock.close()
        for c in self.clients:
            if not c.closed:
                try:
                    sel.unregister(c.sock)
                except (KeyError, ValueError):
                    pass
                c.sock.close()
        sel.close()
        self.all_open.set()
        self.cpu_s = time.thread_time() - t_cpu

    def wait_ended(self, timeout):
        t_end = time.time() + timeout
        while time.time() < t_end:
            if all(c.ended or c.closed for c in self.clients):
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.stop_flag.set()
        self.join(10)


def seq_of(eid):
    """'3-17' -> ('3', 17)."""
    if not eid or "-" not in eid:
        return None, None
    p, _, s = eid.rpartition("-")
    try:
        return p, int(s)
    except ValueError:
        return p, None


def check_streams(g, window=None):
    """Per-client and across-client checks of one group of clients on one stream.

    - each client's ids share one prefix and their sequence numbers strictly increase;
    - events with the same id carry the same type and data for every client;
    - every non-progress event (state, result, end: the log keeps them all) reaches every client;
    - progress events are snapshots (the log keeps only the latest; a client joining gets the
      latest). Let p* be the highest sequence number among the clients' first progress
      events: every event after p* was logged after every client had subscribed, so each
      client must get every one of them up to the last event all clients got (`end` once
      the stream ends). A progress event some clients got and others did not is a miss.
    window=(t0, t1): progress events per second per client over that interval."""
    cl = g.clients
    r = {"clients": len(cl), "http_200": sum(1 for c in cl if c.status == 200),
         "errors": sorted({c.error for c in cl if c.error}),
         "clients_with_error": sum(1 for c in cl if c.error),
         "ended": sum(1 for c in cl if c.ended)}
    prefixes, increasing, per_type, heart = set(), 0, {}, []
    content, content_mismatch = {}, 0
    for c in cl:
        seqs = []
        for _, eid, typ, data in c.events:
            p, s = seq_of(eid)
            prefixes.add(p)
            seqs.append(s)
            h = hashlib.sha1(data.encode()).hexdigest()
            if s in content and content[s] != (typ, h):
                content_mismatch += 1
            content.setdefault(s, (typ, h))
        if all(s is not None for s in seqs) and all(b > a for a, b in zip(seqs, seqs[1:])):
            increasing += 1
        for _, _, typ, _ in c.events:
            per_type.setdefault(typ, [0] * len(cl))
        heart.append(len(c.heartbeats))
    for typ in per_type:
        for k, c in enumerate(cl):
            per_type[typ][k] = sum(1 for e in c.events if e[2] == typ)
    r["prefixes"] = sorted(p or "?" for p in prefixes)
    r["ids_increasing"] = increasing
    r["content_mismatch"] = content_mismatch
    r["events_per_client"] = {t: spread(v) for t, v in sorted(per_type.items())}
    r["events_total"] = sum(len(c.events) for c in cl)
    r["heartbeats_per_client"] = spread(heart)
    # non-progress events: all of them, everywhere
    np_union = {s for s, (t, _) in content.items() if t != "progress"}
    np_missing = sum(len(np_union - {seq_of(e[1])[1] for e in c.events if e[2] != "progress"}) for c in cl)
    r["non_progress_ids"] = len(np_union)
    r["non_progress_missing"] = np_missing
    # progress after everyone subscribed, up to the last event everyone got
    firsts = [next((seq_of(e[1])[1] for e in c.events if e[2] == "progress"), None) for c in cl]
    lasts = [max((seq_of(e[1])[1] for e in c.events), default=None) for c in cl]
    if all(x is not None for x in firsts) and all(x is not None for x in lasts):
        lo, hi = max(firsts), min(lasts)
        union = {s for s in content if lo < s <= hi}
        miss = [len(union - {seq_of(e[1])[1] for e in c.events}) for c in cl]
        r["common_range"] = [lo, hi]
        r["common_ids"] = len(union)
        r["progress_missing"] = sum(miss)
        r["clients_missing_some"] = sum(1 for m in miss if m)
        r["identical_in_range"] = all(m == 0 for m in miss)
    else:
        r["common_range"] = None
        # no progress at all anywhere is fine (nothing to miss); some clients without any is not
        with_progress = sum(1 for x in firsts if x is not None)
        r["progress_missing"] = 0 if with_progress in (0, len(cl)) else len(cl) - with_progress
        r["clients_missing_some"] = r["progress_missing"]
    # per id: first client to last client (fan-out)
    times = {}
    for c in cl:
        for t, eid, _, _ in c.events:
            times.setdefault(eid, []).append(t)
    sp = sorted(max(v) - min(v) for v in times.values() if len(v) == len(cl))
    r["fanout_ms"] = {"p50": pct(sp, 50) * 1e3, "p99": pct(sp, 99) * 1e3, "max": sp[-1] * 1e3} if sp else None
    conn = sorted(c.t_headers - c.t_open for c in cl if c.t_headers)
    r["connect_ms"] = {"p50": pct(conn, 50) * 1e3, "max": conn[-1] * 1e3} if conn else None
    if window:
        t0, t1 = window
        rates = [sum(1 for e in c.events if e[2] == "progress" and t0 <= e[0] <= t1) / (t1 - t0) for c in cl]
        r["progress_per_s"] = spread(rates, 2)
        r["window_s"] = t1 - t0
    r["sequence_example"] = [f"{e[1]} {e[2]}" for e in (cl[0].events if cl else [])][-8:]
    r["ok"] = (r["http_200"] == len(cl) and not r["clients_with_error"] and r["ended"] == len(cl)
               and increasing == len(cl) and len(prefixes) == 1 and not content_mismatch and not np_missing
               and r.get("progress_missing") == 0)
    return r


def spread(v, nd=0):
    if not v:
        return None
    v = sorted(v)
    f = (lambda x: round(x, nd)) if nd else (lambda x: x)
    return {"min": f(v[0]), "median": f(statistics.median(v)), "max": f(v[-1])}
