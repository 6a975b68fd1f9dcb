"""``bitflip.export`` for detectors and segmenters (``bitflip.vision`` says what
the graphs look like). torch_export.export hands over here when ``task`` is
``"detection"`` or ``"segmentation"``, or the model is a torchvision detector or
segmenter."""
import os
import warnings

from .errors import ExportError, need
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
        # the engine's check of a detector's ragged outputs comes with the engine running them;
        # until then: onnx.checker above, and the outputs' names
        params = _params(onnx, path, keys)
    report = te.ExportReport(path=os.fspath(path), eval_path=eval_path, input_names=in_names,
                             output_names=out_names, params=params, checked=checked, max_abs_diff=diff, task=task)
    if verbose:
        print(report.names_text())
        if checked:
            print(f"  checked: bitflip and PyTorch agree on {checked} samples (largest difference {diff:.3g})")
    return report
