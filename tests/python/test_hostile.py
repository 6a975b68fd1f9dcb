"""Hostile input to the package's parsers (the event stream, safetensors, trial
records, the daemon's answers): a clear BitflipError, never a crash or a hang."""
import http.server
import random
import struct
import threading

import pytest

import bitflip
from bitflip.client import parse_sse
from conftest import DIGITS_EVAL


def mutations(seed, base, n=300):
    rng = random.Random(seed)
    for _ in range(n):
        b = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            if op < 0.4 and b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op < 0.7 and b:
                del b[rng.randrange(len(b)):][: rng.randint(1, 64)]
            else:
                b[rng.randrange(len(b) + 1):0] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        yield bytes(b)


def test_event_stream_garbage():
    base = (b"id: 1-1\nevent: state\ndata: {\"state\":\"running\"}\n\n: heartbeat\n\n"
            b"id: 1-2\nevent: end\ndata: {\"state\":\"succeeded\"}\n\n")
    for m in mutations(1, base):
        for ev in parse_sse(m.splitlines(keepends=True)):
            assert isinstance(ev, bitflip.Event)
    evs = list(parse_sse([b"data: \xff\xfe not utf-8\n", b"\n"]))
    assert len(evs) == 1 and "not utf-8" in evs[0].data


def test_safetensors_garbage(tmp_path):
    base = open(DIGITS_EVAL, "rb").read()[:4096]
    n = struct.unpack("<Q", base[:8])[0]
    header = base[8:8 + n]
    small = bitflip.write_safetensors(tmp_path / "s.safetensors", {"x": __import__("numpy").ones((2, 3), "f4")})
    for i, m in enumerate(list(mutations(2, open(small, "rb").read())) + list(mutations(3, base[:8] + header))):
        p = tmp_path / f"m{i}"
        p.write_bytes(m)
        try:
            bitflip.read_safetensors(p)
        except bitflip.BitflipError:
            pass
    for bad in (b"[]", b'{"x": 1}', b'{"x": {"dtype": "F32", "shape": [1000000], "data_offsets": [0, 4000000]}}',
                b'{"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}'):
        p = tmp_path / "bad"
        p.write_bytes(struct.pack("<Q", len(bad)) + bad)
        with pytest.raises(bitflip.BitflipError):
            bitflip.read_safetensors(p)


def test_trial_records_garbage(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"trial": 0, "outcome": "masked"}\n{"trial": 1, "outc')
    with pytest.raises(bitflip.BitflipError, match="trial record 2 is not JSON"):
        bitflip.Trials(str(p)).to_list()
    with pytest.raises(bitflip.BitflipError, match="not a bitflip result"):
        bitflip.Result({"bitflip": "0.1.0"})


class Liar(http.server.BaseHTTPRequestHandler):
    """Not a bitflipd: HTML errors, bodies that are not JSON."""

    def do_GET(self):
        if self.path.startswith("/v1/models/"):
            body, code, ctype = b"<html>502 Bad Gateway</html>", 502, "text/html"
        else:
            body, code, ctype = b"{not json", 200, "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def liar():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Liar)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_answers_that_are_not_bitflipd(liar):
    c = bitflip.Client(liar, timeout=5)
    with pytest.raises(bitflip.ApiError) as e:
        c.model("0" * 64)
    assert e.value.status == 502 and "Bad Gateway" in e.value.detail
    with pytest.raises(bitflip.BitflipError, match="not JSON"):
        c.campaigns()
