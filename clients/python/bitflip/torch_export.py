"""``bitflip.export``: a PyTorch model to ONNX the way fault injection needs it,
its eval set as safetensors, and a check that bitflip computes what PyTorch does.

The export follows docs/EXPORT.md: a dynamic batch axis on every input and
output, opset 13..17, BatchNorm kept as nodes (``TrainingMode.PRESERVE`` on a
model in eval mode) unless ``keep_batchnorm=False`` folds it into the Conv as
inference engines do. After the export the first ``check_samples`` samples run
through ``bitflip eval --outputs`` and through the module; the first value that
differs beyond the tolerance raises :class:`ExportMismatch` naming the output,
the sample and the element. PyTorch runs with autograd on: under ``no_grad``
nn.TransformerEncoderLayer and nn.MultiheadAttention take a fused fast path the
exported graph does not contain (tests/fixtures/make_real_models.py).
"""
import json
import math
import os
import subprocess
import tempfile
import warnings

from .binary import find_binary
from .errors import ExportError, ExportMismatch, need
from .kernel_record import append_record, kernel_calls, record_text
from .safetensors import (_is_batches, collect_batches, normalize_inputs, save_eval_set, to_numpy,
                          write_safetensors)

OPSETS = range(13, 18)


class ExportReport:
    """What :func:`export` made: ``path``, ``eval_path``, ``input_names``,
    ``output_names``, ``params`` (per ONNX parameter: ``name``, ``torch_name``,
    ``torch_note``, ``kept``: it is stored under its state_dict key),
    ``checked`` (samples compared) and ``max_abs_diff``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def kept(self):
        return [p for p in self.params if p["kept"]]

    @property
    def renamed(self):
        return [p for p in self.params if not p["kept"] and p.get("torch_name")]

    @property
    def anonymous(self):
        return [p for p in self.params if not p.get("torch_name")]

    def names_text(self):
        lines = [f"{os.path.basename(self.path)}: {len(self.params)} parameter tensors; "
                 f"{len(self.kept)} keep their PyTorch names, {len(self.renamed)} were renamed by the exporter "
                 f"(bitflip recovers the PyTorch name), {len(self.anonymous)} have no PyTorch name"]
        for p in self.params:
            if p in self.renamed:
                note = f" ({p['torch_note']})" if p.get("torch_note") else ""
                lines.append(f"  {p['name']:<28} = {p['torch_name']}{note}")
            elif p["kept"] and p.get("torch_note"):   # equal tensors the exporter merged into this one
                lines.append(f"  {p['name']:<28}   {p['torch_note']}")
        for p in self.anonymous:
            lines.append(f"  {p['name']:<28}   (no PyTorch name: docs/EXPORT.md says when)")
        return "\n".join(lines)

    def __repr__(self):
        return f"<bitflip.ExportReport {self.path}: {len(self.params)} parameters, checked on {self.checked} samples>"


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _outputs(out):
    if isinstance(out, dict):
        return list(out.values())
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _torch_inputs(torch, arrays, names, example):
    """The eval arrays as tensors with the example inputs' dtypes, in input order."""
    ts = []
    for n, ex in zip(names, example):
        a = arrays[n]
        t = torch.from_numpy(a.copy())
        if isinstance(ex, torch.Tensor):
            t = t.to(ex.dtype)
        ts.append(t)
    return tuple(ts)


def _model_labels(np, out):
    """Labels from the model itself: top-1 class, or a 0/1 decision at 0.5 for one score."""
    out = out.reshape(out.shape[0], -1)
    if out.shape[1] == 1:
        return (out[:, 0] > 0.5).astype(np.float32)
    return out.argmax(axis=1).astype(np.int64)


def export(model, example_inputs, path, *, eval_inputs=None, labels=None, eval_path=None, input_names=None,
           output_names=None, opset=None, keep_batchnorm=True, check=True, check_samples=8, rtol=1e-4, atol=1e-5,
           max_samples=None, bin=None, verbose=True, task=None, kv_cache=False, record_kernels=True,
           **export_kwargs):
    """Exports ``model`` (an nn.Module) to ``path`` for fault injection.

    - ``example_inputs``: one tensor or a tuple, batch on dim 0 (one sample is
      enough); they fix the input dtypes and, without an eval set, are the check set.
    - ``eval_inputs`` (tensor, tuple, dict, or a DataLoader of ``(x, y)``) and
      ``labels`` (int class ids, or 0/1 floats; ``"model"``: the model's own top-1
      predictions, for a first result on random data) are written to
      ``eval_path`` (default: ``path`` with ``.eval.safetensors``).
    - ``input_names``/``output_names`` default to ``input``/``output`` (numbered
      when several). ``opset`` 13..17 (default 13, 17 for a language model).
      ``keep_batchnorm=False`` folds BatchNorm
      into the Conv weights (the deployed model; docs/EXPORT.md says what that
      means for a fault). Other keyword arguments go to ``torch.onnx.export``.
    - ``record_kernels`` (default on): trace the model and record in the file's
      metadata_props (``bitflip.kernels``) which LayerNorm, GroupNorm, GELU and
      Hardswish PyTorch ran as one kernel (nn.LayerNorm, F.gelu, ...), so that
      bitflip fuses exactly those exported patterns and runs the same nodes
      written out by hand op by op, as PyTorch did (docs/NUMERICS.md).
    - ``check``: compare bitflip and PyTorch on ``check_samples`` samples within
      ``|a - b| <= atol + rtol * |b|``; a difference raises :class:`ExportMismatch`.
    - ``task="language_model"``: a decoder-only LM whose first input is the token
      ids int64 ``[batch, sequence]`` and first output the logits ``[batch,
      sequence, vocab]``: the names default to ``input_ids`` and ``logits``, the
      batch and sequence axes are dynamic, ``labels`` are the next token per
      position (int64 ``[N, T]``, -100: none; ``"model"``: the model's own
      arg-max), and the check runs a second, shorter sequence too, so that a
      length the exporter baked in shows up. Tied input/output embeddings keep
      one initializer (constant folding off unless ``do_constant_folding`` is
      given). ``kv_cache=True``: the example inputs after the token ids are the
      past keys and values, per layer a key and a value ``[batch, kv heads,
      past, head dim]``, named ``past_key_values.{i}.key``/``.value``; the
      outputs after the logits are ``present.{i}.key``/``.value``; their
      dim 2 is dynamic too (docs/EXPORT.md).

    - ``task="detection"`` / ``"segmentation"`` (or a torchvision detector or
      segmenter, recognised by class; a list of images as the example means a
      detector): bitflip wraps the model (bitflip/vision.py, vision_export.py).
      A detector takes one image [3, H, W] (input ``images``; outputs ``boxes``,
      ``labels``, ``scores``, and ``masks`` for Mask R-CNN) and its ``labels``
      are torchvision-style targets; a segmenter outputs ``out`` [B, C, H, W]
      and its ``labels`` are masks [N, H, W].

    Prints (``verbose``) which parameters kept their PyTorch names; returns an
    :class:`ExportReport`.
    """
    torch = need("torch", "bitflip.export")
    np = need("numpy", "bitflip.export")
    if opset is None:      # 17 for a language model: Trilu (torch.triu/tril masks) needs 14
        opset = 17 if task == "language_model" else 13
    if opset not in OPSETS:
        raise ExportError(f"opset {opset}: bitflip's exports use opsets 13 to 17 (its operator tests cover those); "
                          "pick one of them")
    path = os.fspath(path)
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"model is a {type(model).__name__}, not a torch.nn.Module")
    vision = _vision_task(model, task, example_inputs)
    if vision:
        if kv_cache:
            raise ExportError(f"kv_cache=True is for task='language_model', not {vision!r}")
        if max_samples is not None:
            raise ExportError(f"max_samples is not taken for task={vision!r}: slice the eval inputs first")
        from .vision_export import export_vision
        was_training = model.training
        model.eval()
        try:
            return export_vision(vision, model, example_inputs, path, eval_inputs=eval_inputs, labels=labels,
                                 eval_path=eval_path, input_names=input_names, output_names=output_names,
                                 opset=opset, keep_batchnorm=keep_batchnorm, check=check,
                                 check_samples=check_samples, rtol=rtol, atol=atol, bin=bin, verbose=verbose,
                                 **export_kwargs)
        finally:
            model.train(was_training)
    was_training = model.training
    model.eval()
    try:
        example = _as_tuple(example_inputs)
        for i, t in enumerate(example):
            if not isinstance(t, torch.Tensor):
                raise ExportError(f"example input {i} is a {type(t).__name__}; pass tensors, the batch on dim 0")
        lm = _lm_check_task(torch, task, kv_cache, example)
        outs = _outputs(model(*example))
        if lm:
            default_in, default_out = _lm_names(len(example), len(outs))
        else:
            default_in = ["input"] if len(example) == 1 else [f"input{i}" for i in range(len(example))]
            default_out = ["output"] if len(outs) == 1 else [f"output{i}" for i in range(len(outs))]
        in_names = list(input_names) if input_names else default_in
        out_names = list(output_names) if output_names else default_out
        if len(in_names) != len(example):
            raise ExportError(f"{len(in_names)} input names {in_names} for {len(example)} example inputs")
        if len(out_names) != len(outs):
            raise ExportError(f"{len(out_names)} output names {out_names} for the model's {len(outs)} outputs")
        if "labels" in in_names:
            raise ExportError("an input named 'labels' would collide with the eval set's label tensor; rename it")
        dyn = {n: {0: "batch"} for n in in_names + out_names}
        fold = True
        if lm:
            dyn = _lm_axes(in_names, out_names)
            fold = not _tied_parameters(model)
        kw = dict(opset_version=opset, input_names=in_names, output_names=out_names, dynamic_axes=dyn,
                  do_constant_folding=fold)
        kw["training"] = torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else torch.onnx.TrainingMode.EVAL
        kw.update(export_kwargs)
        try:
            with warnings.catch_warnings():
                # torch warns about constant folding with PRESERVE even for a model in eval
                # mode, where there is nothing to fold wrongly (docs/EXPORT.md)
                warnings.filterwarnings("ignore", message="It is recommended that constant folding")
                torch.onnx.export(model, example, path, **kw)
        except Exception as e:  # noqa: BLE001 - the exporter raises anything
            raise ExportError(f"torch.onnx.export failed for {path}: {e}") from e
        if record_kernels:      # which patterns PyTorch ran as one kernel (kernel_record.py)
            calls = kernel_calls(torch, model, example)
            if calls is None:
                warnings.warn(f"bitflip.export: tracing {type(model).__name__} failed, so {path} carries no "
                              "record of the kernels PyTorch ran; bitflip fuses every exported pattern")
            else:
                append_record(path, record_text(calls))

        # the eval set
        arrays = None
        if eval_inputs is not None:
            if _is_batches(eval_inputs):
                eval_inputs, loader_labels = collect_batches(eval_inputs, max_samples)
                if loader_labels is not None and labels is None:
                    labels = loader_labels
            arrays = normalize_inputs(eval_inputs, in_names)
            if max_samples:
                arrays = {k: v[:max_samples] for k, v in arrays.items()}
            if isinstance(labels, str):
                if labels != "model":
                    raise ExportError(f"labels={labels!r}: give tensors, or 'model' for the model's own predictions")
                out0 = _run_torch(torch, model, arrays, in_names, example, 256)[0]
                labels = out0.argmax(axis=-1).astype(np.int64) if lm else _model_labels(np, out0)
            eval_path = eval_path or (path[:-5] if path.endswith(".onnx") else path) + ".eval.safetensors"
            if lm:
                _save_lm(eval_path, arrays, labels, in_names)
            else:
                save_eval_set(eval_path, arrays, labels, input_names=in_names)
        elif labels is not None or eval_path:
            raise ExportError("labels or eval_path without eval_inputs: pass the eval inputs too")
        if arrays is None:
            arrays = {n: to_numpy(t) for n, t in zip(in_names, example)}

        exe = find_binary(bin)
        params = _names(exe, path, model)
        report = ExportReport(path=path, eval_path=eval_path, input_names=in_names, output_names=out_names,
                              params=params, checked=0, max_abs_diff=None)
        if check:
            report.checked, report.max_abs_diff = _check(torch, np, exe, model, path, arrays, in_names, out_names,
                                                         example, check_samples, rtol, atol)
            t = arrays[in_names[0]].shape[1] if lm else 0
            if t >= 2:      # a shorter sequence: the sequence axis must be dynamic, not traced as a constant
                short = dict(arrays, **{in_names[0]: arrays[in_names[0]][:, :t - 1]})
                _, d2 = _check(torch, np, exe, model, path, short, in_names, out_names, example, check_samples,
                               rtol, atol)
                report.max_abs_diff = max(report.max_abs_diff, d2)
        if verbose:
            print(report.names_text())
            if check:
                print(f"  checked: bitflip and PyTorch agree on {report.checked} samples "
                      f"(largest difference {report.max_abs_diff:.3g})")
        return report
    finally:
        model.train(was_training)


def _vision_task(model, task, example):
    """'detection' or 'segmentation' when the task says so or the model is
    torchvision's, or a list of images is the example (a detector's call); else None."""
    from .vision import is_detector, is_segmenter
    if task in ("detection", "segmentation"):
        return task
    if task is not None:
        return None
    if is_detector(model) or (isinstance(example, list) and example and hasattr(example[0], "dim")):
        return "detection"
    if is_segmenter(model):
        return "segmentation"
    return None


def _run_torch(torch, model, arrays, names, example, batch):
    """The model's outputs on the arrays, as numpy, batch by batch (autograd on: see above)."""
    n = next(iter(arrays.values())).shape[0]
    res = None
    for s in range(0, n, batch):
        part = {k: v[s:s + batch] for k, v in arrays.items()}
        outs = [to_numpy(o) for o in _outputs(model(*_torch_inputs(torch, part, names, example)))]
        res = [[o] for o in outs] if res is None else [r + [o] for r, o in zip(res, outs)]
    np = need("numpy", "bitflip.export")
    return [np.concatenate(r) for r in res]


def _names(exe, path, model):
    p = subprocess.run([exe, "info", "--json", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise ExportError(f"bitflip cannot use the exported model {path}: {p.stderr.strip()}")
    info = json.loads(p.stdout)
    keys = set(model.state_dict().keys())
    out = []
    for prm in info.get("params", []):
        out.append({"name": prm["name"], "torch_name": prm.get("torch_name"), "torch_note": prm.get("torch_note"),
                    "kept": prm["name"] in keys, "shape": prm.get("shape"), "op": prm.get("read_by_op")})
    return out


def _check(torch, np, exe, model, path, arrays, in_names, out_names, example, n, rtol, atol):
    arrays = {k: v[:n] for k, v in arrays.items()}
    k = next(iter(arrays.values())).shape[0]
    # one sample at a time: an output must not depend on the rest of the batch (a
    # BatchNorm left in training mode, or control flow on the batch, shows up here)
    want = _run_torch(torch, model, arrays, in_names, example, 1)[0].reshape(k, -1).astype(np.float64)
    with tempfile.TemporaryDirectory(prefix="bitflip-export-") as d:
        data = os.path.join(d, "check.safetensors")
        write_safetensors(data, arrays)
        outp = os.path.join(d, "outputs.json")
        p = subprocess.run([exe, "eval", path, data, "--outputs", outp, "--batch", str(k)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise ExportError(f"bitflip eval cannot run the exported model {path}: {p.stderr.strip()}")
        with open(outp) as f:
            rows = json.load(f)
    got = np.array([[_f(v) for v in (r if isinstance(r, list) else [r])] for r in rows], dtype=np.float64)
    if got.shape != want.shape:
        raise ExportMismatch(f"output {out_names[0]!r}: bitflip gives {list(got.shape)} values per check set, "
                             f"PyTorch {list(want.shape)} (samples x values per sample)",
                             out_names[0], None, None, None, None)
    same_nan = np.isnan(got) & np.isnan(want)
    close = np.isclose(got, want, rtol=rtol, atol=atol) | same_nan
    if not close.all():
        i, j = np.argwhere(~close)[0]
        raise ExportMismatch(
            f"bitflip and PyTorch disagree on output {out_names[0]!r} of {path}: sample {i}, element {j}: "
            f"bitflip {got[i, j]:.9g}, PyTorch {want[i, j]:.9g} (tolerance {atol:g} + {rtol:g} x |PyTorch|); "
            f"{int((~close).sum())} of {close.size} values differ. The file does not compute what the module "
            "does: check for train-mode behaviour (dropout, BatchNorm statistics), randomness or Python "
            "control flow in forward() that the exporter traced for the example inputs only",
            out_names[0], int(i), int(j), float(got[i, j]), float(want[i, j]))
    diff = np.abs(got - want)
    diff = diff[~same_nan]
    return k, float(diff.max()) if diff.size else 0.0


def _f(v):
    if isinstance(v, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
    return v


# ---------------------------------------------------------------- language models

def _lm_check_task(torch, task, kv_cache, example):
    """Whether this is a language-model export; checks its example inputs."""
    if task not in (None, "classification", "binary", "language_model"):
        raise ExportError(f"task={task!r}: one of 'classification', 'binary', 'language_model', 'detection', "
                          "'segmentation' (or None)")
    if task != "language_model":
        if kv_cache:
            raise ExportError("kv_cache=True is for task='language_model'")
        return False
    ids = example[0]
    if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
        raise ExportError(f"a language model's first example input is the token ids, int64 [batch, sequence]; "
                          f"got {str(ids.dtype).replace('torch.', '')} {list(ids.shape)}")
    past = example[1:]
    if kv_cache:
        if not past or len(past) % 2:
            raise ExportError(f"kv_cache=True needs the past keys and values after the token ids, a key and a value "
                              f"per layer ([batch, kv heads, past, head dim]); got {len(past)} tensors after them")
        for i, p in enumerate(past):
            if p.dim() != 4 or not p.is_floating_point():
                raise ExportError(f"example past tensor {i} ({'key' if i % 2 == 0 else 'value'} of layer {i // 2}) "
                                  f"is {str(p.dtype).replace('torch.', '')} {list(p.shape)}; past keys and values "
                                  "are float [batch, kv heads, past, head dim]")
            if p.shape[2] < 2:
                raise ExportError(f"example past length {p.shape[2]}: give at least 2 past positions, or the "
                                  "exporter may trace the past axis as a constant")
    elif past:
        raise ExportError(f"{len(past)} example inputs after the token ids: a language model takes input_ids "
                          "alone, or with kv_cache=True the past keys and values")
    return True


def _lm_names(n_in, n_out):
    layers = (n_in - 1) // 2
    ins, outs = ["input_ids"], ["logits"]
    for i in range(layers):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    for i in range((n_out - 1) // 2):
        outs += [f"present.{i}.key", f"present.{i}.value"]
    if n_out != 1 + 2 * ((n_out - 1) // 2) or (layers and n_out != n_in):
        raise ExportError(f"the model returns {n_out} outputs for {n_in} inputs; a language model returns the logits, "
                          "and with a KV cache the present key and value of every layer after them")
    return ins, outs


def _lm_axes(in_names, out_names):
    dyn = {in_names[0]: {0: "batch", 1: "sequence"}, out_names[0]: {0: "batch", 1: "sequence"}}
    for n in in_names[1:]:
        dyn[n] = {0: "batch", 2: "past_sequence"}
    for n in out_names[1:]:
        dyn[n] = {0: "batch", 2: "total_sequence"}
    return dyn


def _tied_parameters(model):
    """Names of parameters that one tensor holds under two names (tied embeddings)."""
    seen, tied = {}, []
    for mname, mod in model.named_modules(remove_duplicate=False):
        for pname, p in mod._parameters.items():
            if p is None:
                continue
            full = f"{mname}.{pname}" if mname else pname
            if id(p) in seen and seen[id(p)] != full:
                tied.append((seen[id(p)], full))
            seen.setdefault(id(p), full)
    return tied


def _save_lm(eval_path, arrays, labels, in_names):
    from .safetensors import lm_labels
    ids = arrays[in_names[0]]
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ExportError(f"eval input {in_names[0]!r} is {ids.dtype.name} {list(ids.shape)}; a language model's "
                          "token ids are int64 [samples, sequence]")
    out = {n: arrays[n] for n in in_names}
    out[in_names[0]] = ids.astype("int64")
    if labels is not None:
        out["labels"] = lm_labels(labels, ids)
    write_safetensors(eval_path, out)
