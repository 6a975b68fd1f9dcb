"""bitflip.run without a server: the bitflip binary, the same Result."""
import json
import os
import subprocess

import pytest

import bitflip
from conftest import DIGITS, DIGITS_EVAL, ROOT, digits_spec


def test_local_run_is_the_cli_result(tmp_path):
    res = bitflip.run(digits_spec(trials=120, seed=8), threads=1, out_dir=tmp_path / "out")
    # the CLI itself, on the same spec: the same document
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(digits_spec(trials=120, seed=8)))
    subprocess.run([os.environ["BITFLIP_BIN"], "run", "--local", str(spec), "--threads", "1", "--out",
                    str(tmp_path / "cli.json"), "--format", "json"], check=True, stdout=subprocess.DEVNULL)
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert res.doc["summary"] == cli["summary"] and res.doc["by_tensor"] == cli["by_tensor"]
    assert os.path.isfile(res.files["result"]) and os.path.isfile(res.files["trials"])
    assert len(res.trials.to_list()) == 120
    again = bitflip.Result.load(res.files["result"], res.files["trials"])
    assert again.summary == res.summary and len(again.trials.to_list()) == 120


def test_spec_file_with_relative_paths(tmp_path, monkeypatch):
    spec = digits_spec(trials=30)
    spec["model"] = os.path.relpath(DIGITS, tmp_path)
    spec["dataset"] = os.path.relpath(DIGITS_EVAL, tmp_path)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    monkeypatch.chdir(ROOT)                  # not the spec's directory: paths are the spec's
    res = bitflip.run(str(tmp_path / "spec.json"))
    assert res.summary["trials"] == 30
    assert res.trials is not None and res._tmp is not None


def test_gates_give_a_verdict(tmp_path):
    res = bitflip.run(digits_spec(trials=200, seed=1), gates=["critical_rate<=1.0", "accuracy>=0.0"])
    assert res.verdict == "pass"
    crit = res.summary["outcomes"]["critical"]
    assert crit > 0                           # this seed hits critical faults: the gate below fails
    res = bitflip.run(digits_spec(trials=200, seed=1), gates="critical_rate<=0.0")
    assert res.verdict == "fail"
    assert "<failure" in open(res.files["junit"]).read()


def test_a_bad_spec_is_a_run_error_naming_the_field():
    spec = digits_spec()
    spec["faults"] = {"model": "bitflip", "bits": 40}
    with pytest.raises(bitflip.RunError) as e:
        bitflip.run(spec)
    assert "/faults/bits" in str(e.value) and e.value.returncode == 2


def test_missing_files_and_binary(monkeypatch, tmp_path):
    with pytest.raises(bitflip.RunError, match="nothing.onnx"):
        bitflip.run(digits_spec(model=str(tmp_path / "nothing.onnx")))
    with pytest.raises(bitflip.BitflipError, match="cannot read the spec"):
        bitflip.run(str(tmp_path / "no-spec.json"))
    monkeypatch.setenv("BITFLIP_BIN", str(tmp_path / "no-bitflip"))
    with pytest.raises(bitflip.BitflipError, match=r"\$BITFLIP_BIN"):
        bitflip.run(digits_spec())
    monkeypatch.delenv("BITFLIP_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    # Neither set nor on the PATH: the checkout's build/bitflip next to the
    # package, else a build/bitflip of the working directory or a parent. The
    # checkout's exists only where the build folder is ROOT/build (ctest runs
    # from any build folder, /work/x-build too): one in a parent of the working
    # directory stands in, so that the fallback is checked either way.
    fake = tmp_path / "build" / "bitflip"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    checkout = os.path.join(ROOT, "build", "bitflip")
    want = checkout if os.path.isfile(checkout) and os.access(checkout, os.X_OK) else str(fake)
    assert os.path.realpath(bitflip.find_binary()) == os.path.realpath(want)
