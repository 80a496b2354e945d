"""The one-time export of the packaged all-MiniLM-L6-v2 to ONNX, run in a subprocess of its own.

    python -m services.retrieval.embedders_onnx_export MODEL_DIR FP32_OUT INT8_OUT SETTINGS_JSON

This is the only place the ONNX backends touch torch: :func:`services.retrieval.embedders_onnx.
ensure_onnx_models` runs it once per cache key (under a file lock) and renames what it writes
into place, so the process that asked never imports torch, transformers or the ONNX quantizer.

The exported graph takes ``input_ids`` and ``attention_mask`` (int64, ``[batch, sequence]``) and
gives ``sentence_embedding`` (float32, ``[batch, 384]``): BERT, then mean pooling over the
attention mask and L2 normalisation, the model's own three sentence-transformers modules.  The
legacy TorchScript exporter (``dynamo=False``) is used: it needs no ``onnxscript`` and its output
is byte-identical from run to run.  The int8 variant is ``quantize_dynamic`` of that graph with
per-channel ``QUInt8`` weights (settings passed in ``SETTINGS_JSON``; they are part of the cache key).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any


def export_fp32(model_dir: Path, out: Path, opset: int) -> None:
    """Write the fp32 graph of the model in ``model_dir`` to ``out`` (torch and transformers here only)."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()

    class SentenceEncoder(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    ids = torch.ones(2, 8, dtype=torch.long)
    mask = torch.ones(2, 8, dtype=torch.long)
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            SentenceEncoder(bert),
            (ids, mask),
            str(out),
            input_names=["input_ids", "attention_mask"],
            output_names=["sentence_embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "sentence_embedding": {0: "batch"},
            },
            opset_version=opset,
            dynamo=False,
        )


def quantize_int8(source: Path, out: Path, settings: dict[str, Any]) -> None:
    """Dynamic int8 quantization of ``source`` (weights int8 ahead of time, activations at run time)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
    quantize_dynamic(
        str(source),
        str(out),
        per_channel=bool(settings["per_channel"]),
        reduce_range=bool(settings["reduce_range"]),
        weight_type=QuantType[str(settings["weight_type"])],
    )


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: embedders_onnx_export MODEL_DIR FP32_OUT INT8_OUT SETTINGS_JSON", file=sys.stderr)
        return 2
    model_dir, fp32_out, int8_out = (Path(arg) for arg in argv[:3])
    settings = json.loads(argv[3])
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        export_fp32(model_dir, fp32_out, int(settings["opset"]))
        quantize_int8(fp32_out, int8_out, settings["int8"])
    except Exception as exc:  # one line for the parent's EmbedderError
        print(f"{type(exc).__name__}: {exc}".replace("\n", " ")[:400], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
