"""``bitflip.export`` for detectors and segmenters (``bitflip.vision`` says what
the graphs look like). torch_export.export hands over here when ``task`` is
``"detection"`` or ``"segmentation"``, or the model is a torchvision detector or
segmenter."""
import json
import os
import subprocess
import tempfile
import warnings

from .errors import ExportError, ExportMismatch, need
from .vision import (DETECTION_OUTPUTS, detection_wrapper, save_detection_eval_set, save_segmentation_eval_set,
                     segmentation_wrapper)

WRAP = "model."     # the wrapper holds the user's model as .model: its names lose this prefix


def _one_image(torch, example):
    """The example detector input as one image [3, H, W]."""
    x = example
    if isinstance(x, (list, tuple)):
        if len(x) != 1:
            raise ExportError(f"a detector's example input is one image [3, H, W] (or a list of one); got a list of "
                              f"{len(x)}: the export takes one image per call")
        x = x[0]
    if not isinstance(x, torch.Tensor):
        raise ExportError(f"the example input is a {type(x).__name__}; give an image tensor [3, H, W]")
    if x.dim() == 4 and x.shape[0] == 1:
        x = x[0]
    if x.dim() != 3 or not x.is_floating_point():
        raise ExportError(f"a detector's example input is one float image [3, H, W]; got "
                          f"{str(x.dtype).replace('torch.', '')} {list(x.shape)}")
    return x.float()


def _strip_prefix(onnx, path, keys):
    """Gives the initializers the user's names: the wrapper's 'model.' prefix goes."""
    m = onnx.load(path)
    ren = {}
    for init in m.graph.initializer:
        if init.name.startswith(WRAP) and init.name[len(WRAP):] in keys:
            ren[init.name] = init.name[len(WRAP):]
    if not ren:
        return
    taken = {i.name for i in m.graph.initializer} | {v.name for v in m.graph.input} | \
        {o for n in m.graph.node for o in n.output}
    ren = {a: b for a, b in ren.items() if b not in taken}

    def fix(graph):
        for init in graph.initializer:
            init.name = ren.get(init.name, init.name)
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name in ren:
                    node.input[i] = ren[name]
            for a in node.attribute:      # If/Loop bodies read outer initializers by name
                if a.type == onnx.AttributeProto.GRAPH:
                    fix(a.g)
                for g in a.graphs:
                    fix(g)
    fix(m.graph)
    onnx.save(m, path)


def _check_detector(torch, np, exe, wrapper, path, images, in_name, out_names, rtol, atol):
    """Runs the exported detector on ``images`` [K, 3, H, W] with ``bitflip eval`` (one
    image per call) and the wrapper in PyTorch, image by image, and matches their
    detections as tests/fixtures/README.md ("Matching for detection") does: the same
    number of rows per image and output, labels exactly, a row of several values (a
    box's corners, a mask) within ``rtol`` of the row's largest finite magnitude (at
    least ``atol``), a score within ``atol + rtol * |score|``; rows whose scores tie
    may come in either order (_tied_rows). Returns (images
    checked, largest difference); a difference raises ExportMismatch naming the output,
    the image, the detection and the element."""
    from . import torch_export as te
    from .safetensors import write_safetensors
    with tempfile.TemporaryDirectory(prefix="bitflip-export-") as d:
        data = os.path.join(d, "check.safetensors")
        write_safetensors(data, {in_name: np.ascontiguousarray(images, dtype=np.float32)})
        outp = os.path.join(d, "outputs.json")
        p = subprocess.run([exe, "eval", path, data, "--outputs", outp], capture_output=True, text=True)
        if p.returncode != 0:
            raise ExportError(f"bitflip eval cannot run the exported detector {path}: {p.stderr.strip()} "
                              "(check=False skips the check)")
        with open(outp) as f:
            rows = json.load(f)
    if len(rows) != len(images):
        raise ExportError(f"bitflip eval gave {len(rows)} images' outputs for the {len(images)} checked")
    worst = 0.0
    with torch.no_grad():
        for i, (row, im) in enumerate(zip(rows, images)):
            want = [te.to_numpy(o) for o in te._outputs(wrapper(torch.from_numpy(np.array(im, dtype=np.float32))))]
            got, wants, tols = [], [], []
            for k, (name, w) in enumerate(zip(out_names, want)):
                w = np.asarray(w, dtype=np.float64)
                n = w.shape[0] if w.ndim else 1
                per = int(np.prod(w.shape[1:])) if w.ndim > 1 else 1
                g = np.array([te._f(v) for v in row.get(name, [])], dtype=np.float64)
                if g.size != w.size:
                    raise ExportMismatch(
                        f"bitflip and PyTorch disagree on output {name!r} of {path}, image {i}: bitflip gives "
                        f"{g.size // per if per else g.size} detections, PyTorch {n}. The file does not compute "
                        "what the module does (or a score or an overlap sits at a threshold, where the last bit of "
                        "a sum decides; check=False skips the check)", name, i, None, None, None)
                g, w = g.reshape(n, per), w.reshape(n, per)
                if k == 1:      # labels: exactly
                    tol = np.zeros_like(w)
                elif per > 1:   # a row is one object: its values to the row's scale
                    fin = np.where(np.isfinite(w), np.abs(w), 0.0)
                    tol = np.maximum(atol, rtol * fin.max(axis=1, initial=0.0))[:, None] * np.ones_like(w)
                else:
                    tol = atol + rtol * np.abs(w)
                got.append(g), wants.append(w), tols.append(tol)
            perm = _tied_rows(np, got, wants, tols, 2 if len(wants) > 2 else None)
            for k, name in enumerate(out_names[:len(wants)]):
                g, w, tol = got[k][perm], wants[k], tols[k]
                per = w.shape[1]
                both_nan = np.isnan(g) & np.isnan(w)
                diff = np.abs(g - w)
                bad = ~((diff <= tol) | both_nan)
                if bad.any():
                    r, e = (int(x) for x in np.argwhere(bad)[0])
                    what = f"detection {r}" + (f", element {e}" if per > 1 else "")
                    raise ExportMismatch(
                        f"bitflip and PyTorch disagree on output {name!r} of {path}, image {i}, {what}: bitflip "
                        f"{g[r, e]:.9g}, PyTorch {w[r, e]:.9g} (tolerance {tol[r, e]:.3g}); {int(bad.sum())} of "
                        f"{bad.size} values differ. The file does not compute what the module does: check for "
                        "train-mode behaviour, randomness or Python control flow in forward() that the exporter "
                        "traced for the example only (check=False skips the check)",
                        name, i, r * per + e, float(g[r, e]), float(w[r, e]))
                d = diff[~both_nan & np.isfinite(diff)]
                if d.size:
                    worst = max(worst, float(d.max()))
    return len(images), worst


def _tied_rows(np, got, want, tol, k_scores):
    """bitflip's row for each of PyTorch's: the same row, except among detections whose
    PyTorch scores tie within the tolerance (an untrained head scores many boxes alike),
    whose order is the sort's and not the model's: there each PyTorch row takes the first
    unused bitflip row of its tie that matches it in every output."""
    n = want[0].shape[0]
    perm = np.arange(n)
    if k_scores is None or n < 2:
        return perm

    def same(g, r):
        return all(np.all((np.abs(gk[g] - wk[r]) <= tk[r]) | (np.isnan(gk[g]) & np.isnan(wk[r])))
                   for gk, wk, tk in zip(got, want, tol))

    s, t = want[k_scores][:, 0], tol[k_scores][:, 0]
    start = 0
    for end in range(1, n + 1):
        if end < n and abs(s[end] - s[end - 1]) <= t[end - 1]:
            continue
        used = set()
        for r in range(start, end):
            for g in range(start, end):
                if g not in used and same(g, r):
                    perm[r] = g
                    used.add(g)
                    break
        start = end
    return perm


def _params(onnx, path, keys):
    """Per fp32 parameter: its name and whether it keeps the PyTorch name (the
    detection path: `bitflip info` may not load a graph the engine cannot run yet)."""
    m = onnx.load(path)
    return [{"name": i.name, "torch_name": i.name if i.name in keys else None, "torch_note": None,
             "kept": i.name in keys, "shape": list(i.dims), "op": None}
            for i in m.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) > 0]


def export_vision(task, model, example_inputs, path, *, eval_inputs=None, labels=None, eval_path=None,
                  input_names=None, output_names=None, opset=13, keep_batchnorm=True, check=True,
                  check_samples=8, rtol=1e-4, atol=1e-5, bin=None, verbose=True, **export_kwargs):
    """See torch_export.export: ``task`` is ``"detection"`` or ``"segmentation"``."""
    torch = need("torch", "bitflip.export")
    onnx = need("onnx", f"exporting a {'detector' if task == 'detection' else 'segmenter'}")
    from . import torch_export as te
    keys = set(model.state_dict().keys())
    if task == "detection":
        example = (_one_image(torch, example_inputs),)
        wrapper = detection_wrapper(model)
        default_in = ["images"]
        default_out = DETECTION_OUTPUTS + (["masks"] if wrapper.masks else [])
    else:
        example = te._as_tuple(example_inputs)
        if len(example) != 1 or not isinstance(example[0], torch.Tensor) or example[0].dim() != 4:
            raise ExportError("a segmenter's example input is one image batch [B, 3, H, W]; got "
                              + ", ".join(f"{type(t).__name__} {list(getattr(t, 'shape', []))}" for t in example))
        wrapper = segmentation_wrapper(model)
        default_in, default_out = ["input"], ["out"]
    in_names = list(input_names) if input_names else default_in
    out_names = list(output_names) if output_names else default_out
    if len(in_names) != 1 or len(out_names) != len(default_out):
        raise ExportError(f"a {task} model has 1 input and {len(default_out)} outputs ({default_out}); got input "
                          f"names {in_names} and output names {out_names}")
    with torch.no_grad():
        outs = te._outputs(wrapper(*example))
    if task == "detection":
        dyn = {n: {0: "detections"} for n in out_names}
    else:
        dyn = {in_names[0]: {0: "batch"}, out_names[0]: {0: "batch"}}
        if outs[0].dim() != 4:
            raise ExportError(f"the segmenter's 'out' is {list(outs[0].shape)}; bitflip wants logits [B, C, H, W]")
    kw = dict(opset_version=opset, input_names=in_names, output_names=out_names, dynamic_axes=dyn,
              do_constant_folding=True,
              training=torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else torch.onnx.TrainingMode.EVAL)
    kw.update(export_kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # the detection code's tracer warnings are about its own design
            torch.onnx.export(wrapper, example, path, **kw)
    except Exception as e:  # noqa: BLE001 - the exporter raises anything
        raise ExportError(f"torch.onnx.export failed for {path}: {e}") from e
    _strip_prefix(onnx, path, keys)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    got = [o.name for o in m.graph.output]
    if got != out_names:
        raise ExportError(f"the exported graph's outputs are {got}, not {out_names}")

    if eval_inputs is not None:
        eval_path = eval_path or (path[:-5] if path.endswith(".onnx") else path) + ".eval.safetensors"
        if task == "detection":
            if labels is None:
                raise ExportError("a detector's eval set needs its ground truth: labels= a list of dicts with "
                                  "'boxes' [K, 4] (xyxy) and 'labels' [K], one per image")
            save_detection_eval_set(eval_path, eval_inputs, labels, input_name=in_names[0])
        elif labels is not None:
            save_segmentation_eval_set(eval_path, eval_inputs, labels, input_name=in_names[0])
        else:
            from .safetensors import save_eval_set
            save_eval_set(eval_path, eval_inputs, None, input_names=in_names)
    elif labels is not None or eval_path:
        raise ExportError("labels or eval_path without eval_inputs: pass the eval inputs too")

    checked, diff = 0, None
    if task == "segmentation":
        exe = te.find_binary(bin)
        params = te._names(exe, path, model)
        if check:
            if eval_inputs is not None:
                from .vision import _images
                arrays = {in_names[0]: _images(eval_inputs, "eval_inputs")}
            else:
                arrays = {in_names[0]: te.to_numpy(example[0])}
            checked, diff = te._check(torch, need("numpy", "bitflip.export"), exe, wrapper, path, arrays, in_names,
                                      out_names, example, check_samples, rtol, atol)
    else:
        params = _params(onnx, path, keys)
        if check:
            np = need("numpy", "bitflip.export")
            if eval_inputs is not None:
                from .vision import _images
                images = _images(eval_inputs, "eval_inputs")[:check_samples]
            else:
                images = te.to_numpy(example[0])[None]
            checked, diff = _check_detector(torch, np, te.find_binary(bin), wrapper, path, images, in_names[0],
                                            out_names, rtol, atol)
    report = te.ExportReport(path=os.fspath(path), eval_path=eval_path, input_names=in_names,
                             output_names=out_names, params=params, checked=checked, max_abs_diff=diff, task=task)
    if verbose:
        print(report.names_text())
        if checked:
            print(f"  checked: bitflip and PyTorch agree on {checked} samples (largest difference {diff:.3g})")
    return report
