"""Detectors and segmenters: the wrappers ``bitflip.export`` puts around a
torchvision-style model, and the eval sets of the two tasks.

A detector (torchvision's GeneralizedRCNN -- Faster/Mask R-CNN --, SSD,
RetinaNet, FCOS, or any module that takes a list of images [3, H, W] and
returns a list of dicts with ``boxes``, ``labels`` and ``scores``) is exported
as one image per call: input ``images`` float32 [3, H, W], outputs ``boxes``
[K, 4] (xyxy, input pixels), ``labels`` int64 [K], ``scores`` [K] (and
``masks`` [K, 1, H, W] for Mask R-CNN), K depending on the image. A segmenter
(torchvision's FCN, DeepLabV3, LRASPP: a dict with ``out`` and maybe ``aux``)
is exported with output ``out`` [B, C, H, W] (the logits), the batch axis
dynamic. The user passes the model as it is; the wrapper is bitflip's.

Eval sets (safetensors, docs/PYTHON.md): a detection set holds the images
[N, 3, H, W] under the graph input's name, ``gt_boxes`` float32 [K, 4] (xyxy
pixels), ``gt_labels`` int64 [K] and ``gt_offsets`` int64 [N + 1] (image i
owns rows gt_offsets[i] .. gt_offsets[i+1]-1); a segmentation set the images
and ``labels`` int64 [N, H, W] (class ids, 255 ignored).
"""
from .errors import BitflipError, need
from .safetensors import to_numpy, write_safetensors

IGNORE_LABEL = 255      # a pixel without a class (VOC's border), left out of the metrics
DETECTION_OUTPUTS = ["boxes", "labels", "scores"]


def _torch_nn():
    torch = need("torch", "exporting a detector or segmenter")
    return torch, torch.nn


def is_detector(model):
    """A torchvision detection model (GeneralizedRCNN, SSD, RetinaNet, FCOS)."""
    try:
        from torchvision.models.detection.fcos import FCOS
        from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
        from torchvision.models.detection.retinanet import RetinaNet
        from torchvision.models.detection.ssd import SSD
    except ImportError:
        return False
    return isinstance(model, (SSD, RetinaNet, FCOS, GeneralizedRCNN))


def is_segmenter(model):
    """A torchvision segmentation model (FCN, DeepLabV3: _SimpleSegmentationModel; LRASPP)."""
    try:
        from torchvision.models.segmentation import lraspp
        from torchvision.models.segmentation._utils import _SimpleSegmentationModel
    except ImportError:
        return False
    return isinstance(model, (_SimpleSegmentationModel, lraspp.LRASPP))


def detection_wrapper(model, with_masks=None):
    """The module bitflip exports for a detector: one image [3, H, W] in,
    (boxes, labels, scores[, masks]) out. ``with_masks`` None: masks when the
    model returns them (Mask R-CNN). A torchvision detector is called with a
    list of the one image; any other module (a YOLO-style detector written in
    plain PyTorch) with the image itself, and may return a dict with
    ``boxes``, ``labels``, ``scores``, a list of one such dict, or a tuple
    (boxes, labels, scores), in that order."""
    torch, nn = _torch_nn()

    class DetectionExport(nn.Module):
        def __init__(self, m, masks, listed):
            super().__init__()
            self.model, self.masks, self.listed = m, masks, listed

        def forward(self, images):
            out = self.model([images]) if self.listed else self.model(images)
            if isinstance(out, (list, tuple)) and len(out) == 1 and isinstance(out[0], dict):
                out = out[0]
            if isinstance(out, dict):
                res = (out["boxes"], out["labels"], out["scores"])
                return res + (out["masks"],) if self.masks else res
            if not isinstance(out, (list, tuple)) or len(out) < 3:
                raise BitflipError(f"the detector returned {type(out).__name__}; bitflip.export takes a dict with "
                                   "'boxes', 'labels' and 'scores' (torchvision's), a list of one such dict, or a "
                                   "tuple (boxes [K, 4], labels [K], scores [K])")
            return tuple(out[:3])

    if with_masks is None:
        with_masks = bool(getattr(getattr(model, "roi_heads", None), "has_mask", lambda: False)())
    return DetectionExport(model, with_masks, is_detector(model))


def segmentation_wrapper(model):
    """The module bitflip exports for a segmenter: [B, 3, H, W] in, the ``out`` logits out."""
    torch, nn = _torch_nn()

    class SegmentationExport(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, x):
            y = self.model(x)
            return y["out"] if isinstance(y, dict) else y

    return SegmentationExport(model)


def _images(images, what="images"):
    """[N, 3, H, W] float32 from a tensor/array or a list of [3, H, W] (the same size)."""
    np = need("numpy", "writing an eval set")
    if isinstance(images, (list, tuple)):
        if not images:
            raise BitflipError(f"{what}: an empty list; give at least one image [3, H, W]")
        arrs = [to_numpy(x, f"{what}[{i}]") for i, x in enumerate(images)]
        for i, a in enumerate(arrs):
            if a.ndim != 3:
                raise BitflipError(f"{what}[{i}] has shape {list(a.shape)}; an image is [3, H, W] (channels first)")
            if a.shape != arrs[0].shape:
                raise BitflipError(f"{what}[{i}] is {list(a.shape)} but {what}[0] is {list(arrs[0].shape)}: an eval "
                                   "set holds images of one size; resize them first (to the size the model was "
                                   "exported at)")
        x = np.stack(arrs)
    else:
        x = to_numpy(images, what)
        if x.ndim == 3:
            x = x[None]
        if x.ndim != 4:
            raise BitflipError(f"{what} has shape {list(x.shape)}; give [N, 3, H, W] or a list of [3, H, W]")
    if x.shape[0] == 0:
        raise BitflipError(f"{what}: no images")
    if x.shape[1] not in (1, 3):
        raise BitflipError(f"{what} has {x.shape[1]} channels on dim 1 ({list(x.shape)}); images are channels "
                           "first, [N, 3, H, W]")
    if x.dtype.kind != "f":
        raise BitflipError(f"{what} have dtype {x.dtype.name}; give float images (as the model takes them, "
                           "e.g. in [0, 1]): convert with .float() / 255 first")
    if not np.all(np.isfinite(x)):
        raise BitflipError(f"{what} hold NaN or infinite values")
    return x.astype(np.float32)


def save_detection_eval_set(path, images, targets, input_name="images"):
    """Writes a detection eval set: the images [N, 3, H, W] as ``input_name``,
    ``gt_boxes`` float32 [K, 4] (xyxy, pixels of the image as given),
    ``gt_labels`` int64 [K] and ``gt_offsets`` int64 [N + 1].

    ``images``: a tensor/array [N, 3, H, W] or a list of [3, H, W] of one size;
    ``targets``: a list of N dicts as torchvision's detection datasets give them,
    with ``boxes`` [K_i, 4] (x1, y1, x2, y2) and ``labels`` [K_i] (an image
    without objects: K_i = 0). Returns the path."""
    np = need("numpy", "writing an eval set")
    x = _images(images)
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    if not isinstance(targets, (list, tuple)):
        raise BitflipError(f"targets is a {type(targets).__name__}; give a list of dicts, one per image, with "
                           "'boxes' [K, 4] (xyxy) and 'labels' [K]")
    if len(targets) != n:
        raise BitflipError(f"{len(targets)} targets for {n} images: give one dict per image")
    boxes, labels, offsets = [], [], [0]
    for i, t in enumerate(targets):
        if not isinstance(t, dict) or "boxes" not in t or "labels" not in t:
            raise BitflipError(f"targets[{i}] must be a dict with 'boxes' [K, 4] and 'labels' [K]")
        b = to_numpy(t["boxes"], f"targets[{i}]['boxes']")
        lab = to_numpy(t["labels"], f"targets[{i}]['labels']")
        if b.size == 0:
            b = b.reshape(0, 4)
        if b.ndim != 2 or b.shape[1] != 4:
            raise BitflipError(f"targets[{i}]['boxes'] has shape {list(b.shape)}; boxes are [K, 4], (x1, y1, x2, y2)")
        if lab.ndim != 1 or lab.shape[0] != b.shape[0]:
            raise BitflipError(f"targets[{i}]['labels'] has shape {list(lab.shape)} for {b.shape[0]} boxes; give "
                               "one label per box ([K])")
        if lab.size and lab.dtype.kind not in "iu":
            raise BitflipError(f"targets[{i}]['labels'] have dtype {lab.dtype.name}; labels are integer class ids")
        if lab.size and lab.min() < 0:
            raise BitflipError(f"targets[{i}]['labels'] holds {int(lab.min())}; class ids are >= 0")
        b = b.astype(np.float64)
        if not np.all(np.isfinite(b)):
            raise BitflipError(f"targets[{i}]['boxes'] holds NaN or infinite values")
        bad = (b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1])
        if bad.any():
            k = int(np.argmax(bad))
            raise BitflipError(f"targets[{i}]['boxes'][{k}] is {b[k].tolist()}: boxes are (x1, y1, x2, y2) with "
                               "x2 >= x1 and y2 >= y1 (convert xywh or cxcywh first, e.g. "
                               "torchvision.ops.box_convert)")
        out = (b[:, 0] < 0) | (b[:, 1] < 0) | (b[:, 2] > w) | (b[:, 3] > h)
        if out.any():
            k = int(np.argmax(out))
            raise BitflipError(f"targets[{i}]['boxes'][{k}] is {b[k].tolist()}, outside the {w}x{h} image: boxes "
                               "are in the pixels of the images as saved (resize the boxes with the images)")
        boxes.append(b.astype(np.float32))
        labels.append(lab.astype(np.int64))
        offsets.append(offsets[-1] + b.shape[0])
    if input_name in ("gt_boxes", "gt_labels", "gt_offsets", "labels"):
        raise BitflipError(f"input_name {input_name!r} is one of the eval set's ground-truth tensors; rename the input")
    return write_safetensors(path, {input_name: x,
                                    "gt_boxes": np.concatenate(boxes).reshape(-1, 4),
                                    "gt_labels": np.concatenate(labels),
                                    "gt_offsets": np.array(offsets, dtype=np.int64)})


def save_segmentation_eval_set(path, images, masks, input_name="input", num_classes=None):
    """Writes a segmentation eval set: the images [N, 3, H, W] as ``input_name``
    and ``labels`` int64 [N, H, W], a class id per pixel (255: ignored).

    ``masks``: a tensor/array [N, H, W] (or [N, 1, H, W]) or a list of [H, W],
    of the images' height and width; ``num_classes`` (optional) checks that
    every id below 255 is below it. Returns the path."""
    np = need("numpy", "writing an eval set")
    x = _images(images)
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    if isinstance(masks, (list, tuple)):
        if len(masks) != n:
            raise BitflipError(f"{len(masks)} masks for {n} images: give one mask [H, W] per image")
        ms = [to_numpy(m, f"masks[{i}]") for i, m in enumerate(masks)]
        for i, m in enumerate(ms):
            if m.shape != (h, w) and m.shape != (1, h, w):
                raise BitflipError(f"masks[{i}] has shape {list(m.shape)}, the images are {h}x{w}: a mask is [H, W] "
                                   "of the image's size (resize masks with nearest-neighbour interpolation)")
        y = np.stack([m.reshape(h, w) for m in ms])
    else:
        y = to_numpy(masks, "masks")
        if y.ndim == 4 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 3 or y.shape != (n, h, w):
            raise BitflipError(f"masks have shape {list(y.shape)}; the {n} images are {h}x{w}, so give [{n}, {h}, {w}] "
                               "class ids (resize masks with nearest-neighbour interpolation)")
    if y.dtype.kind not in "iu":
        whole = y.dtype.kind == "f" and bool(np.all(y == np.round(y)))
        raise BitflipError(f"masks have dtype {y.dtype.name}; a mask holds integer class ids per pixel"
                           + (" (these are whole numbers: convert with .long())" if whole else
                              " (probabilities or one-hot masks: take the argmax over classes first)"))
    y = y.astype(np.int64)
    bad = (y < 0) | ((y >= num_classes) & (y != IGNORE_LABEL) if num_classes else (y > IGNORE_LABEL))
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        top = f"[0, {num_classes})" if num_classes else "[0, 255)"
        raise BitflipError(f"masks{list(i)} is {int(y[i])}: a pixel's label is a class id in {top} or 255 (ignored)")
    if input_name == "labels":
        raise BitflipError("input_name 'labels' is the eval set's label tensor; rename the input")
    return write_safetensors(path, {input_name: x, "labels": y})
