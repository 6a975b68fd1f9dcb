"""A client for bitflipd's REST API (api/openapi.yaml, docs/SERVICE.md).

Standard library only (urllib, json, hashlib). Uploads go by content hash: the
daemon names models and datasets by their sha256, so the file is hashed here and
looked up with ``GET /v1/models/{sha256}`` first; only a 404 sends the bytes.
The event stream is parsed here (a few lines of the WHATWG format) rather than
with a library, because the standard library has none and the client is to need
nothing else; it reconnects with ``Last-Event-ID``.
"""
import hashlib
import http.client
import io
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

from .errors import ApiError, BitflipError, CampaignFailed, ConnectionFailed
from .progress import Progress
from .result import Result, Trials

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Event:
    """One Server-Sent Event: ``id`` (``<run>-<n>``), ``event`` (``state``,
    ``progress``, ``result``, ``end``) and ``data`` (the parsed JSON)."""

    __slots__ = ("id", "event", "data")

    def __init__(self, id, event, data):
        self.id = id
        self.event = event
        self.data = data

    def __repr__(self):
        return f"Event(id={self.id!r}, event={self.event!r}, data={self.data!r})"


def parse_sse(lines):
    """Events from an iterable of byte lines (WHATWG HTML, "Server-sent events").

    Comments (``: heartbeat``) are skipped; an event is dispatched at a blank line;
    a stream cut mid-event drops that event, as a browser does.
    """
    ev_id, ev_type, data = None, None, []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                text = "\n".join(data)
                try:
                    payload = json.loads(text)
                except ValueError:
                    payload = text
                yield Event(ev_id, ev_type or "message", payload)
            ev_type, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            ev_type = value
        elif field == "id" and "\0" not in value:
            ev_id = value


def _campaign_id(c):
    if isinstance(c, dict):
        c = c.get("id")
    if not isinstance(c, str) or not c:
        raise BitflipError(f"{c!r} is not a campaign: pass the id string or the dict submit() returned")
    return c


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Client:
    """bitflipd at ``url`` (else $BITFLIP_SERVER), with a bearer ``token`` (else
    $BITFLIP_TOKEN; none for a daemon without tokens).

    Every method raises :class:`ApiError` (``status``, ``title``, ``detail``,
    ``errors``) when the daemon refuses, and :class:`ConnectionFailed` when it
    cannot be reached.
    """

    def __init__(self, url=None, token=None, *, timeout=60.0):
        url = url or os.environ.get("BITFLIP_SERVER")
        if not url:
            raise BitflipError("no server: Client('http://HOST:PORT'), or set BITFLIP_SERVER")
        if not re.match(r"^https?://", url):
            raise BitflipError(f"server URL {url!r} needs a scheme: http://{url} or https://{url}")
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("BITFLIP_TOKEN")
        self.timeout = timeout
        self.uploads_sent = 0      # upload bodies actually sent (the others were already there)

    # --- plumbing -------------------------------------------------------------

    def _open(self, method, path, *, body=None, headers=None, query=None, timeout=None):
        url = self.url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        h = {"Accept": "application/json, application/problem+json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers or {})
        req = urllib.request.Request(url, data=body, headers=h, method=method)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise self._problem(e, method, url) from None
        except urllib.error.URLError as e:
            raise ConnectionFailed(f"{method} {url}: cannot reach bitflipd ({e.reason}); is it running, "
                                   "and is the URL right?") from None
        except (socket.timeout, ConnectionError) as e:
            raise ConnectionFailed(f"{method} {url}: {e}") from None

    @staticmethod
    def _problem(e, method, url):
        raw = e.read()
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = raw.decode("utf-8", "replace").strip()[:500]
            return ApiError(e.code, title=e.reason, detail=text or None, method=method, url=url, body=raw)
        return ApiError(doc.get("status", e.code), title=doc.get("title"), detail=doc.get("detail"),
                        type=doc.get("type"), instance=doc.get("instance"), errors=doc.get("errors"),
                        method=method, url=url, body=doc, retry_after=e.headers.get("Retry-After"))

    def _json(self, method, path, **kw):
        with self._open(method, path, **kw) as r:
            raw = r.read()
            url = r.geturl()
        try:
            return json.loads(raw) if raw else None
        except ValueError as e:
            raise BitflipError(f"{method} {url}: the answer is not JSON ({e}): {raw[:200]!r}; "
                               "is this URL a bitflipd?") from None

    def _pages(self, path, query=None):
        token = None
        while True:
            q = dict(query or {})
            q["page_token"] = token
            page = self._json("GET", path, query=q)
            yield from page.get("items", [])
            token = page.get("next_page_token")
            if not token:
                return

    # --- models, datasets and error maps ----------------------------------------------

    def _upload(self, kind, src, name, route=None):
        route = route or f"{kind}s"
        if isinstance(src, (bytes, bytearray)):
            sha, size, opener = hashlib.sha256(src).hexdigest(), len(src), lambda: io.BytesIO(src)
        else:
            path = os.fspath(src)
            if not os.path.isfile(path):
                raise BitflipError(f"{kind} file {path!r} does not exist")
            sha, size, opener = sha256_file(path), os.path.getsize(path), lambda: open(path, "rb")
            name = name or os.path.basename(path)
        try:
            return self._json("GET", f"/v1/{route}/{sha}")
        except ApiError as e:
            if e.status != 404:
                raise
        with opener() as f:
            self.uploads_sent += 1
            return self._json("POST", f"/v1/{route}", body=f, query={"name": name},
                              headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})

    def upload_model(self, src, name=None):
        """Stores an ONNX model (a path or bytes) unless the daemon has these bytes
        already; returns the model (``id`` = sha256, the parameters: the fault surface)."""
        return self._upload("model", src, name)

    def upload_dataset(self, src, name=None):
        """Stores a safetensors eval set unless the daemon has these bytes already."""
        return self._upload("dataset", src, name)

    def upload_error_map(self, src, name=None):
        """Stores a chip's error map (.bfmap, for fault model ``profiled``) unless the
        daemon has these bytes already; a spec names it ``"sha256:" + map["id"]``."""
        return self._upload("error map", src, name, route="error-maps")

    def error_map(self, map_id):
        return self._json("GET", f"/v1/error-maps/{map_id}")

    def error_maps(self):
        return list(self._pages("/v1/error-maps"))

    def delete_error_map(self, map_id):
        self._json("DELETE", f"/v1/error-maps/{map_id}")

    def model(self, model_id):
        return self._json("GET", f"/v1/models/{model_id}")

    def dataset(self, dataset_id):
        return self._json("GET", f"/v1/datasets/{dataset_id}")

    def models(self):
        return list(self._pages("/v1/models"))

    def datasets(self):
        return list(self._pages("/v1/datasets"))

    def delete_model(self, model_id):
        self._json("DELETE", f"/v1/models/{model_id}")

    def delete_dataset(self, dataset_id):
        self._json("DELETE", f"/v1/datasets/{dataset_id}")

    # --- campaigns -----------------------------------------------------------------

    def _prepare(self, spec):
        base = os.getcwd()
        if not isinstance(spec, dict):
            path = os.fspath(spec)
            with open(path) as f:
                spec = json.load(f)
            base = os.path.dirname(os.path.abspath(path))
        spec = dict(spec)
        for key, up in (("model", self.upload_model), ("dataset", self.upload_dataset)):
            v = spec.get(key)
            if isinstance(v, str) and not _HEX64.match(v):
                p = v if os.path.isabs(v) or os.path.exists(v) else os.path.join(base, v)
                if not os.path.isfile(p):
                    raise BitflipError(f"spec {key} {v!r} is neither a {key} id (64 hex digits) nor a file")
                spec[key] = up(p)["id"]
            elif hasattr(v, "__fspath__"):
                spec[key] = up(v)["id"]
        # a profiled campaign's map: a path here becomes the upload's "sha256:ID"
        faults = spec.get("faults")
        em = faults.get("error_map") if isinstance(faults, dict) else None
        if (isinstance(em, str) and not em.startswith("sha256:")) or hasattr(em, "__fspath__"):
            em = os.fspath(em)
            p = em if os.path.isabs(em) or os.path.exists(em) else os.path.join(base, em)
            if not os.path.isfile(p):
                raise BitflipError(f"spec faults.error_map {em!r} is neither 'sha256:ID' nor a file")
            spec["faults"] = dict(faults, error_map="sha256:" + self.upload_error_map(p)["id"])
        return spec

    def submit(self, spec, *, idempotency_key=None):
        """Queues a campaign; returns it (``id``, ``state``, ...). ``spec`` is a dict
        or a JSON file (docs/CAMPAIGNS.md); a ``model`` or ``dataset`` that is a file
        path is uploaded (by hash) and replaced by its id."""
        body = json.dumps(self._prepare(spec)).encode()
        h = {"Content-Type": "application/json"}
        if idempotency_key:
            h["Idempotency-Key"] = idempotency_key
        return self._json("POST", "/v1/campaigns", body=body, headers=h)

    def campaign(self, campaign):
        return self._json("GET", f"/v1/campaigns/{_campaign_id(campaign)}")

    def campaigns(self, state=None):
        return list(self._pages("/v1/campaigns", {"state": state}))

    def cancel(self, campaign):
        return self._json("POST", f"/v1/campaigns/{_campaign_id(campaign)}/cancel")

    def delete(self, campaign):
        self._json("DELETE", f"/v1/campaigns/{_campaign_id(campaign)}")

    def _open_events(self, cid, last_event_id, timeout):
        h = {"Accept": "text/event-stream"}
        if last_event_id:
            h["Last-Event-ID"] = last_event_id
        return self._open("GET", f"/v1/campaigns/{cid}/events", headers=h, timeout=timeout)

    def watch(self, campaign, *, last_event_id=None, progress=False, reconnects=10, timeout=None):
        """Yields the campaign's events (:class:`Event`) until ``end``.

        A stream that breaks (or closes before ``end``: the daemon restarted) is
        reopened with ``Last-Event-ID``, at most ``reconnects`` times in a row, and
        no event is yielded twice. ``last_event_id`` starts after a known event.
        ``progress=True`` draws a progress bar on stderr.
        """
        cid = _campaign_id(campaign)
        # heartbeats come every 15 s by default: a silence of 4 of them is a dead stream
        timeout = timeout or max(self.timeout, 60.0)
        bar = Progress(f"campaign {cid}") if progress else None
        # Ids are "<run>-<n>"; a finished campaign's log is replayed as "f-<n>", and a
        # daemon restart starts a new run, so a reconnect across either replays the log
        # from its start with new ids. What was already yielded is skipped by content:
        # states seen, progress not past the last, a second result.
        seen, states, done, had_result, failures = set(), set(), -1, False, 0
        try:
            while True:
                try:
                    resp = self._open_events(cid, last_event_id, timeout)
                    with resp:
                        for ev in parse_sse(resp):
                            failures = 0
                            if ev.id:
                                last_event_id = ev.id
                                if ev.id in seen:
                                    continue
                                seen.add(ev.id)
                            data = ev.data if isinstance(ev.data, dict) else {}
                            if ev.event == "state":
                                if data.get("state") in states:
                                    continue
                                states.add(data.get("state"))
                            elif ev.event == "progress":
                                if data.get("trials_done", 0) <= done:
                                    continue
                                done = data.get("trials_done", 0)
                            elif ev.event == "result":
                                if had_result:
                                    continue
                                had_result = True
                            if bar and ev.event == "progress" and isinstance(ev.data, dict):
                                bar.update(ev.data.get("trials_done", 0), ev.data.get("trials_planned"))
                            yield ev
                            if ev.event == "end":
                                return
                except (ConnectionFailed, OSError, http.client.HTTPException) as e:
                    failures += 1
                    if failures > reconnects:
                        raise ConnectionFailed(f"the event stream of campaign {cid} broke {failures} times in a row "
                                               f"(last: {e}); the campaign goes on: watch it again later") from None
                else:
                    failures += 1
                    if failures > reconnects:
                        raise ConnectionFailed(f"the event stream of campaign {cid} closed {failures} times "
                                               "without an end event")
                time.sleep(min(0.2 * 2 ** (failures - 1), 5.0))
        finally:
            if bar:
                bar.close()

    def wait(self, campaign, *, progress=False):
        """Follows the campaign to its end; returns its :class:`Result`, or raises
        :class:`CampaignFailed` if it failed or was canceled."""
        cid = _campaign_id(campaign)
        end = None
        for ev in self.watch(cid, progress=progress):
            if ev.event == "end":
                end = ev.data
        if not isinstance(end, dict) or end.get("state") != "succeeded":
            end = end if isinstance(end, dict) else {}
            raise CampaignFailed(cid, end.get("state"), end.get("error"))
        return self.result(cid)

    def result(self, campaign):
        """The result of a succeeded campaign; its ``trials`` stream from the daemon
        when read."""
        cid = _campaign_id(campaign)
        doc = self._json("GET", f"/v1/campaigns/{cid}/results", query={"format": "json"})
        info = self.campaign(cid)
        return Result(doc, trials=self.trials(cid), verdict=info.get("verdict"), campaign=info)

    def results_text(self, campaign, format="csv"):
        """The results as the daemon renders them: ``csv`` or ``junit`` (XML)."""
        with self._open("GET", f"/v1/campaigns/{_campaign_id(campaign)}/results", query={"format": format}) as r:
            return r.read().decode("utf-8")

    def trials(self, campaign):
        """The per-trial records (:class:`Trials`), streamed as JSON Lines when iterated."""
        cid = _campaign_id(campaign)

        def lines():
            with self._open("GET", f"/v1/campaigns/{cid}/results", query={"format": "json", "trials": "true"},
                            timeout=max(self.timeout, 300.0)) as r:
                yield from r
        return Trials(lines)

    def run(self, spec, *, progress=False, idempotency_key=None):
        """submit + wait: the :class:`Result` of ``spec`` run on this daemon."""
        return self.wait(self.submit(spec, idempotency_key=idempotency_key), progress=progress)

