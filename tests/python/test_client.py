"""bitflip.Client against a real bitflipd on loopback (the daemon fixture)."""
import hashlib
import json

import pytest

import bitflip
from conftest import DIGITS, DIGITS_EVAL, digits_spec


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def uploads(daemon, kind):
    return daemon.requests(f"/v1/{kind}s", 200) + daemon.requests(f"/v1/{kind}s", 201)


def test_upload_by_hash_sends_the_bytes_once(daemon, alice, bob):
    before = uploads(daemon, "model")
    m = alice.upload_model(DIGITS, name="digits")
    assert m["id"] == sha(DIGITS)                 # the daemon's id is the file's sha256
    assert any(p["name"] == "fc.weight" for p in m["params"])
    sent = alice.uploads_sent
    again = alice.upload_model(DIGITS)
    assert again["id"] == m["id"]
    assert alice.uploads_sent == sent             # the client did not send it ...
    assert uploads(daemon, "model") == before + 1  # ... and the daemon saw one upload (its own counter)
    # the same bytes under another tenant: not visible to bob, so bob uploads them
    bob.upload_model(DIGITS)
    assert uploads(daemon, "model") == before + 2
    d = alice.upload_dataset(DIGITS_EVAL)
    assert d["id"] == sha(DIGITS_EVAL)
    n = uploads(daemon, "dataset")
    alice.upload_dataset(DIGITS_EVAL)
    assert uploads(daemon, "dataset") == n
    assert m["id"] in [x["id"] for x in alice.models()]
    assert m["id"] in [x["id"] for x in bob.models()]


def test_submit_watch_result_trials(daemon, alice):
    c = alice.submit(digits_spec())
    assert c["state"] in ("queued", "running", "succeeded")
    events = list(alice.watch(c))
    kinds = [e.event for e in events]
    assert kinds[0] == "state" and kinds[-1] == "end" and "result" in kinds
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids)
    assert events[-1].data["state"] == "succeeded"
    res = alice.result(c)
    assert isinstance(res, bitflip.Result)
    assert res.summary["trials"] == 400
    # the result event carries the same document
    assert [e.data for e in events if e.event == "result"][0]["summary"] == res.summary
    # the trial records stream as JSON Lines; tallied here they give the summary's counts
    recs = list(res.trials)
    assert [t["trial"] for t in recs] == list(range(400))
    tally = {k: 0 for k in ("masked", "tolerable", "critical", "due")}
    for t in recs:
        tally[t["outcome"]] += 1
    assert tally == res.summary["outcomes"]
    # the same spec run locally gives the same result (the engine is deterministic)
    local = bitflip.run(digits_spec(), threads=1)
    assert local.summary == res.summary
    assert local.doc["by_tensor"] == res.doc["by_tensor"]
    assert "critical" in alice.results_text(c, "csv")
    alice.delete(c)
    with pytest.raises(bitflip.ApiError) as e:
        alice.campaign(c)
    assert e.value.status == 404


def test_watch_resumes_after_last_event_id(alice):
    c = alice.submit(digits_spec(trials=64, seed=9))
    list(alice.watch(c))
    # a finished campaign's log is replayed with ids f-1..f-4: state, progress, result, end
    full = list(alice.watch(c))
    assert [(e.id, e.event) for e in full] == [("f-1", "state"), ("f-2", "progress"), ("f-3", "result"),
                                               ("f-4", "end")]
    rest = list(alice.watch(c, last_event_id="f-2"))
    assert [e.id for e in rest] == ["f-3", "f-4"]


class FakeResponse:
    def __init__(self, lines, cut=False):
        self.lines, self.cut = lines, cut

    def __iter__(self):
        yield from self.lines
        if self.cut:
            raise ConnectionResetError("cut")

    def __enter__(self):
        return self

    def __exit__(self, *a):
        pass


def sse(*events):
    out = []
    for i, kind, data in events:
        out += [f"id: {i}\n".encode(), f"event: {kind}\n".encode(), f"data: {json.dumps(data)}\n".encode(), b"\n"]
    return out


def test_watch_skips_the_replay_after_a_finish_or_restart(monkeypatch):
    """Reconnecting across the campaign's end (or a daemon restart) gets the log
    again under new ids; what was yielded already is not yielded twice."""
    p = {"trials_done": 10, "trials_planned": 20}
    streams = [
        FakeResponse(sse(("1-1", "state", {"state": "queued"}), ("1-2", "state", {"state": "running"}),
                         ("1-3", "progress", p)), cut=True),
        FakeResponse(sse(("f-1", "state", {"state": "succeeded"}), ("f-2", "progress", p),
                         ("f-3", "result", {"summary": {}}), ("f-4", "end", {"state": "succeeded"}))),
    ]
    asked = []

    def opener(self, cid, last_event_id, timeout):
        asked.append(last_event_id)
        return streams[len(asked) - 1]

    monkeypatch.setattr(bitflip.Client, "_open_events", opener)
    got = [(e.id, e.event) for e in bitflip.Client("http://127.0.0.1:9").watch("c1")]
    assert asked == [None, "1-3"]
    assert got == [("1-1", "state"), ("1-2", "state"), ("1-3", "progress"), ("f-1", "state"), ("f-3", "result"),
                   ("f-4", "end")]


def test_watch_reconnects_without_repeating(alice, monkeypatch):
    c = alice.submit(digits_spec(trials=3000, seed=11))
    sent = []
    real = bitflip.Client._open_events

    class CutAfterOne:
        """The first response ends abruptly after one event, as a dropped connection does."""

        def __init__(self, resp):
            self.resp = resp

        def __iter__(self):
            blank = 0
            for line in self.resp:
                yield line
                blank += line.strip() == b""
                if blank == 1:
                    raise ConnectionResetError("cut by the test")

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.resp.close()

    def opener(self, cid, last_event_id, timeout):
        sent.append(last_event_id)
        resp = real(self, cid, last_event_id, timeout)
        return CutAfterOne(resp) if len(sent) == 1 else resp

    monkeypatch.setattr(bitflip.Client, "_open_events", opener)
    got = list(alice.watch(c))
    assert sent[0] is None and sent[1] == got[0].id      # reconnected with Last-Event-ID
    # every event once: whether the reconnect resumed the live log or (the campaign
    # having finished meanwhile) got its replay, nothing is yielded twice
    assert len({e.id for e in got}) == len(got)
    states = [e.data["state"] for e in got if e.event == "state"]
    assert len(states) == len(set(states)) and states[-1] == "succeeded"
    assert [e.event for e in got].count("result") == 1
    assert got[-1].event == "end" and got[-1].data["state"] == "succeeded"
    done = [e.data["trials_done"] for e in got if e.event == "progress"]
    assert done == sorted(set(done))


def test_cancel(alice):
    c = alice.submit(digits_spec(trials=2_000_000, seed=2))
    after = alice.cancel(c)
    assert after["id"] == c["id"]
    end = [e for e in alice.watch(c)][-1]
    assert end.event == "end" and end.data["state"] == "canceled"
    with pytest.raises(bitflip.CampaignFailed) as e:
        alice.wait(c)
    assert e.value.state == "canceled"
    with pytest.raises(bitflip.ApiError) as e:
        alice.cancel(c)                          # already finished
    assert e.value.status == 409 and e.value.title and e.value.detail
    with pytest.raises(bitflip.ApiError) as e:
        alice.result(c)                          # no result without success
    assert e.value.status == 409
    alice.delete(c)


def test_errors_carry_the_problem(daemon, alice, bob):
    spec = digits_spec()
    spec["faults"] = {"model": "bitflip", "bits": 40, "postions": [1]}
    with pytest.raises(bitflip.ApiError) as e:
        alice.submit(spec)
    err = e.value
    assert err.status == 422 and err.title == "Unprocessable Content"
    pointers = {x["pointer"]: x["detail"] for x in err.errors}
    assert "/faults/bits" in pointers and "positions" in pointers["/faults/postions"]
    assert "/faults/bits" in str(err)           # the message shows every problem
    # another tenant's campaign does not exist for bob
    c = alice.submit(digits_spec(trials=16))
    with pytest.raises(bitflip.ApiError) as e:
        bob.campaign(c)
    assert e.value.status == 404 and e.value.detail
    # a bad token
    with pytest.raises(bitflip.ApiError) as e:
        bitflip.Client(daemon.url, "bft_" + "0" * 64).campaigns()
    assert e.value.status == 401
    with pytest.raises(bitflip.ApiError) as e:
        alice.model("not-an-id")
    assert e.value.status == 404 and "64" in e.value.detail
    with pytest.raises(bitflip.BitflipError, match="neither a model id"):
        alice.submit(digits_spec(model="/nonexistent/model.onnx"))
    list(alice.watch(c))
    alice.delete(c)


def test_idempotency_key(alice):
    a = alice.submit(digits_spec(trials=32), idempotency_key="py-suite-1")
    b = alice.submit(digits_spec(trials=32), idempotency_key="py-suite-1")
    assert a["id"] == b["id"]
    with pytest.raises(bitflip.ApiError) as e:
        alice.submit(digits_spec(trials=33), idempotency_key="py-suite-1")
    assert e.value.status == 422
    list(alice.watch(a))


def test_run_with_a_client_is_the_remote_path(alice):
    res = bitflip.run(digits_spec(trials=50, seed=4), client=alice, progress=True)
    assert res.summary["trials"] == 50 and res.verdict is None
    gated = dict(digits_spec(trials=50, seed=4), gates=["critical_rate<=0.0"])
    res = bitflip.run(gated, client=alice)
    crit = res.summary["outcomes"]["critical"]
    assert res.verdict == ("pass" if crit == 0 else "fail")


def test_unreachable_server():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(bitflip.ConnectionFailed, match="cannot reach bitflipd"):
        bitflip.Client(f"http://127.0.0.1:{port}").models()
    with pytest.raises(bitflip.BitflipError, match="needs a scheme"):
        bitflip.Client("127.0.0.1:8080")


def test_sse_parser_follows_the_format():
    raw = [b": heartbeat\n", b"\n", b"id: 3-1\n", b"event: state\n", b'data: {"state":"running"}\n', b"\n",
           b"data: line1\n", b"data: line2\n", b"\n", b"id: 3-2\n", b"event: end\n", b"data: {}\n"]
    evs = list(bitflip.client.parse_sse(raw))
    assert [(e.id, e.event, e.data) for e in evs] == [("3-1", "state", {"state": "running"}),
                                                      ("3-1", "message", "line1\nline2")]


def test_spec_file_paths_resolve_against_the_spec(tmp_path, alice):
    import os
    spec = digits_spec(trials=20)
    spec["model"] = os.path.relpath(DIGITS, tmp_path)
    spec["dataset"] = os.path.relpath(DIGITS_EVAL, tmp_path)
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(spec))
    c = alice.submit(str(p))
    assert alice.wait(c).summary["trials"] == 20


def test_profiled_campaign_uploads_its_error_map(daemon, alice, bob, tmp_path):
    """A spec whose faults.error_map is a path: the client uploads the map and
    submits "sha256:ID"; the map is the tenant's, and the result names it."""
    import struct
    head = json.dumps({"format": 1, "rows": 4, "cols": 5, "flip": 2, "stuck_at_0": 1, "stuck_at_1": 1}).encode()
    path = tmp_path / "chip.bfmap"   # written by hand from docs/CAMPAIGNS.md, not by bitflip
    path.write_bytes(b"BFERRMAP" + struct.pack("<Q", len(head)) + head + struct.pack("<4Q", 1, 7, 12, 18))
    stutz = DIGITS.replace("conformance/demo_digits.onnx", "stutz/")
    spec = {"model": stutz + "linear.onnx", "dataset": stutz + "linear.eval.safetensors", "seed": 4,
            "metrics": ["mse"], "faults": {"model": "profiled", "error_map": str(path), "repeats": 8,
                                           "representation": "uint4", "w_max": 1.5}}
    c = alice.submit(spec)
    assert c["spec"]["faults"]["error_map"] == "sha256:" + sha(path)
    assert [m["id"] for m in alice.error_maps()] == [sha(path)]
    assert alice.error_map(sha(path))["cells"] == 4
    assert bob.error_maps() == []
    res = alice.wait(c)
    assert res.summary["trials"] == 8
    assert res.doc["campaign"]["error_map"]["path"] == "sha256:" + sha(path)
    sent = alice.uploads_sent
    assert alice.upload_error_map(path)["id"] == sha(path) and alice.uploads_sent == sent   # known: not sent again
    with pytest.raises(bitflip.ApiError) as e:
        alice.upload_error_map(b"BFERRMAP\x10\x00")
    assert e.value.status == 422
    alice.delete_error_map(sha(path))
    assert alice.error_maps() == []
