"""bitflip.export on torchvision detectors and segmenters as the user has them
(the wrapper is bitflip's): graph names and shapes, initializer names without
the wrapper's prefix, the eval sets beside them; the export checked against
PyTorch by `bitflip eval` (onnx 1.12 has no reference evaluator): a segmenter's
logits, a detector's detections matched per image and row, and an export that
does not compute what the module does caught."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh installs it)")
pytest.importorskip("torchvision", reason="python3-torchvision is not installed")
onnx = pytest.importorskip("onnx", reason="python3-onnx is not installed")
import bitflip  # noqa: E402
from bitflip.errors import ExportError, ExportMismatch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures"))
import det_models as D  # noqa: E402


def ops(g):
    out = set()
    for n in g.node:
        out.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= ops(a.g)
    return out


def data(n=3, size=40):
    x, boxes, labels, masks = D.draw_set(3, n, size)
    return np.stack(x), [{"boxes": torch.from_numpy(b), "labels": torch.from_numpy(lab)}
                         for b, lab in zip(boxes, labels)], np.stack(masks)


# SSDlite's untrained head scores boxes alike (ties to the last bit): its rows of tied
# scores come in the sort's order, which the check matches in either order
@pytest.mark.parametrize("build, outs", [(D.b_ssd, ["boxes", "labels", "scores"]),
                                          (D.b_ssdlite, ["boxes", "labels", "scores"]),
                                          (D.b_maskrcnn, ["boxes", "labels", "scores", "masks"])])
def test_detector(tmp_path, build, outs):
    torch.manual_seed(0)
    m = build(40).train()
    x, targets, _ = data()
    rep = bitflip.export(m, torch.from_numpy(x[0]), tmp_path / "det.onnx", eval_inputs=list(x), labels=targets,
                         verbose=False)
    assert m.training, "the model's mode is restored"
    assert rep.task == "detection" and rep.input_names == ["images"] and rep.output_names == outs
    # bitflip eval ran the file on the 3 images and matched PyTorch's detections
    assert rep.checked == 3 and rep.max_abs_diff < 1e-2
    g = onnx.load(rep.path)
    onnx.checker.check_model(g)
    assert [d.dim_value for d in g.graph.input[0].type.tensor_type.shape.dim] == [3, 40, 40]
    assert [o.name for o in g.graph.output] == outs
    assert {"If", "NonMaxSuppression"} <= ops(g.graph)
    if "masks" in outs:
        assert {"RoiAlign", "Loop"} <= ops(g.graph)
    names = {i.name for i in g.graph.initializer}
    keys = set(m.state_dict())
    assert not any(n.startswith("model.") for n in names)
    assert {p["name"] for p in rep.kept} == names & keys and rep.kept
    t = bitflip.read_safetensors(rep.eval_path)
    assert t["images"].shape == (3, 3, 40, 40) and t["gt_offsets"][-1] == len(t["gt_labels"])


def test_detector_from_list_and_refusals(tmp_path):
    torch.manual_seed(0)
    m = D.b_ssdlite(40)
    x, targets, _ = data(2)
    rep = bitflip.export(m, [torch.from_numpy(x[0])], tmp_path / "a.onnx", verbose=False)
    assert rep.output_names == ["boxes", "labels", "scores"] and rep.eval_path is None
    with pytest.raises(ExportError, match="one image per call"):
        bitflip.export(m, [torch.from_numpy(x[0])] * 2, tmp_path / "b.onnx", verbose=False)
    with pytest.raises(ExportError, match="ground truth"):
        bitflip.export(m, torch.from_numpy(x[0]), tmp_path / "c.onnx", eval_inputs=x, verbose=False)
    with pytest.raises(ExportError, match="1 input and 3 outputs"):
        bitflip.export(m, torch.from_numpy(x[0]), tmp_path / "d.onnx", output_names=["boxes"], verbose=False)


@pytest.mark.parametrize("build", [D.b_lraspp, D.b_deeplabv3])
def test_segmenter_checked_by_bitflip(tmp_path, build):
    torch.manual_seed(0)
    m = build(20)
    with torch.no_grad():       # BatchNorm statistics that are not the identity
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    x, _, masks = data(4, 20)
    x = (x - 0.5) / 0.25
    rep = bitflip.export(m, torch.from_numpy(x[:1]), tmp_path / "seg.onnx", eval_inputs=x, labels=masks,
                         verbose=False)
    assert rep.task == "segmentation" and rep.output_names == ["out"] and rep.checked == 4
    assert rep.max_abs_diff < 1e-4
    g = onnx.load(rep.path)
    assert g.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    t = bitflip.read_safetensors(rep.eval_path)
    assert t["labels"].dtype == np.int64 and np.array_equal(t["labels"], masks)
    assert not any(i.name.startswith("model.") for i in g.graph.initializer)


def test_detector_not_torchvision(tmp_path):
    """A YOLO-style detector in plain PyTorch (one image in, a tuple boxes, labels, scores out)
    with task="detection": the wrapper calls it with the image, not a list, and `bitflip eval`
    runs the graph one image per call and gives PyTorch's detections."""
    import json
    import subprocess
    torch.manual_seed(0)
    m = D.b_yolo(40).eval()
    with torch.no_grad():
        m.head.bias[4:].fill_(2.0)      # confident untrained scores: detections to compare
    x, targets, _ = data(2)
    rep = bitflip.export(m, torch.from_numpy(x[0]), tmp_path / "yolo.onnx", eval_inputs=x, labels=targets,
                         task="detection", verbose=False)
    assert rep.output_names == ["boxes", "labels", "scores"]
    exe = os.environ["BITFLIP_BIN"]       # conftest.py sets it
    out = tmp_path / "o.json"
    subprocess.run([exe, "eval", rep.path, rep.eval_path, "--outputs", str(out)], check=True, capture_output=True)
    rows = json.load(open(out))
    with torch.no_grad():
        for r, im in zip(rows, x):
            b, lab, s = m(torch.from_numpy(im))
            assert len(s) > 0 and len(r["scores"]) == len(s)
            assert np.allclose(np.array(r["boxes"]).reshape(-1, 4), b.numpy(), atol=1e-4)
            assert np.array_equal(np.array(r["labels"]), lab.numpy())
            assert np.allclose(r["scores"], s.numpy(), atol=1e-5)


class _Perturbed(torch.nn.Module):
    """A detector that computes one thing and exports another: its boxes move by
    half a pixel in the traced graph only."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        b, lab, s = self.m(x)
        if torch.onnx.is_in_onnx_export():
            b = b + 0.5
        return b, lab, s


def test_detector_mismatch_caught(tmp_path):
    """bitflip.export runs the file and the module on the eval images and matches
    their detections: boxes off by half a pixel raise ExportMismatch naming the
    output, the image and the detection; check=False skips the check."""
    torch.manual_seed(0)
    m = D.b_yolo(40).eval()
    with torch.no_grad():
        m.head.bias[4:].fill_(2.0)      # confident untrained scores: detections to compare
    x, targets, _ = data(2)
    good = bitflip.export(m, torch.from_numpy(x[0]), tmp_path / "good.onnx", eval_inputs=x, labels=targets,
                          task="detection", verbose=False)
    assert good.checked == 2 and good.max_abs_diff < 1e-3
    with torch.no_grad():
        assert len(m(torch.from_numpy(x[0]))[2]) > 0      # the check had detections to compare
    with pytest.raises(ExportMismatch, match=r"output 'boxes' of .*image 0, detection 0, element 0") as e:
        bitflip.export(_Perturbed(m), torch.from_numpy(x[0]), tmp_path / "bad.onnx", eval_inputs=x,
                       labels=targets, task="detection", verbose=False)
    assert e.value.output == "boxes" and e.value.sample == 0
    assert abs(e.value.bitflip - e.value.torch - 0.5) < 1e-4
    rep = bitflip.export(_Perturbed(m), torch.from_numpy(x[0]), tmp_path / "bad.onnx", eval_inputs=x,
                         labels=targets, task="detection", check=False, verbose=False)
    assert rep.checked == 0
