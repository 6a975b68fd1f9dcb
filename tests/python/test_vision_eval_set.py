"""bitflip.save_detection_eval_set / save_segmentation_eval_set: the layouts of
issue 31 (docs/PYTHON.md), read back with the package's safetensors reader, and
every malformed input refused with an error naming it."""
import numpy as np
import pytest

import bitflip
from bitflip.errors import BitflipError


def images(n=3, h=8, w=10):
    return np.random.default_rng(0).random((n, 3, h, w)).astype(np.float32)


def targets():
    return [{"boxes": np.array([[1, 2, 5, 6], [0, 0, 10, 8]], np.float32), "labels": np.array([1, 2])},
            {"boxes": np.zeros((0, 4), np.float32), "labels": np.zeros(0, np.int64)},
            {"boxes": [[2.5, 1, 3.5, 7]], "labels": [2]}]


def test_detection_round_trip(tmp_path):
    x = images()
    p = bitflip.save_detection_eval_set(tmp_path / "d.safetensors", list(x), targets())
    t = bitflip.read_safetensors(p)
    assert sorted(t) == ["gt_boxes", "gt_labels", "gt_offsets", "images"]
    assert t["images"].dtype == np.float32 and np.array_equal(t["images"], x)
    assert t["gt_boxes"].dtype == np.float32 and t["gt_boxes"].shape == (3, 4)
    assert t["gt_boxes"].tolist() == [[1, 2, 5, 6], [0, 0, 10, 8], [2.5, 1, 3.5, 7]]
    assert t["gt_labels"].dtype == np.int64 and t["gt_labels"].tolist() == [1, 2, 2]
    assert t["gt_offsets"].dtype == np.int64 and t["gt_offsets"].tolist() == [0, 2, 2, 3]


def test_detection_input_name_and_tensor(tmp_path):
    p = bitflip.save_detection_eval_set(tmp_path / "d.safetensors", images(), targets(), input_name="image")
    t = bitflip.read_safetensors(p)
    assert t["image"].shape == (3, 3, 8, 10)


@pytest.mark.parametrize("bad, msg", [
    (lambda x, t: ([x[0], x[1][:, :7]], t[:2]), "resize"),
    (lambda x, t: (x, t[:2]), "2 targets for 3 images"),
    (lambda x, t: (x, [dict(t[0], boxes=np.array([[5, 2, 1, 6], [0, 0, 1, 1]]))] + t[1:]), "x2 >= x1"),
    (lambda x, t: (x, [dict(t[0], boxes=np.zeros((2, 5)))] + t[1:]), "[K, 4]"),
    (lambda x, t: (x, [dict(t[0], labels=np.array([1]))] + t[1:]), "one label per box"),
    (lambda x, t: (x, [dict(t[0], labels=np.array([1.0, 2.0]))] + t[1:]), "integer class ids"),
    (lambda x, t: (x, [dict(t[0], labels=np.array([-1, 2]))] + t[1:]), ">= 0"),
    (lambda x, t: (x, [dict(t[0], boxes=np.array([[1, 2, 5, 6], [0, 0, 11, 8]]))] + t[1:]), "outside the 10x8"),
    (lambda x, t: (x, [dict(t[0], boxes=np.array([[1, 2, np.nan, 6], [0, 0, 1, 1]]))] + t[1:]), "NaN"),
    (lambda x, t: (x, [{"boxes": t[0]["boxes"]}] + t[1:]), "'labels'"),
    (lambda x, t: (x.astype(np.uint8), t), "float images"),
    (lambda x, t: (x[:, :, :, :, None], t), "[N, 3, H, W]"),
    (lambda x, t: (x.transpose(0, 2, 3, 1), t), "channels"),
    (lambda x, t: (x, {"boxes": 1}), "list of dicts"),
])
def test_detection_refusals(tmp_path, bad, msg):
    x, t = bad(images(), targets())
    with pytest.raises(BitflipError, match=None) as e:
        bitflip.save_detection_eval_set(tmp_path / "d.safetensors", x, t)
    assert msg in str(e.value)
    assert not (tmp_path / "d.safetensors").exists()


def test_segmentation_round_trip(tmp_path):
    x = images(2, 4, 5)
    m = np.zeros((2, 4, 5), np.int32)
    m[0, 1, 1] = 2
    m[1, 3, 4] = 255
    p = bitflip.save_segmentation_eval_set(tmp_path / "s.safetensors", x, m, num_classes=3)
    t = bitflip.read_safetensors(p)
    assert sorted(t) == ["input", "labels"]
    assert t["labels"].dtype == np.int64 and np.array_equal(t["labels"], m)
    assert np.array_equal(t["input"], x)
    # a list of masks, and [N, 1, H, W]
    p = bitflip.save_segmentation_eval_set(tmp_path / "s2.safetensors", list(x), list(m), input_name="pixels")
    assert np.array_equal(bitflip.read_safetensors(p)["labels"], m)
    p = bitflip.save_segmentation_eval_set(tmp_path / "s3.safetensors", x, m[:, None])
    assert np.array_equal(bitflip.read_safetensors(p)["labels"], m)


@pytest.mark.parametrize("bad, msg", [
    (lambda m: m[:, :3], "[2, 4, 5]"),
    (lambda m: m[:1], "[2, 4, 5]"),
    (lambda m: m.astype(np.float32), "convert with .long()"),
    (lambda m: m.astype(np.float32) + 0.5, "argmax"),
    (lambda m: m - 1, "class id"),
    (lambda m: np.where(m == 0, 3, m), "class id in [0, 3)"),
    (lambda m: list(m[:, :3]), "resize masks"),
])
def test_segmentation_refusals(tmp_path, bad, msg):
    x = images(2, 4, 5)
    m = np.zeros((2, 4, 5), np.int64)
    with pytest.raises(BitflipError) as e:
        bitflip.save_segmentation_eval_set(tmp_path / "s.safetensors", x, bad(m), num_classes=3)
    assert msg in str(e.value)
