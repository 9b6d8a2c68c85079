"""ONNX export of the fine-tuned text classifiers and the ONNX Runtime backend (tiny BERT)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from skxmc.text import TrainingConfig  # noqa: E402
from skxmc.text._onnx import OnnxTextModel  # noqa: E402

from .._helpers import make_knnbert, make_sharprecl, topic_texts  # noqa: E402

torch.set_num_threads(1)
ATOL = 1e-4

# Texts of many lengths (1 to 16 tokens after truncation at max_length=16).
QUERIES = [
    "cat",
    "the cat sat on the mat",
    "stock market price bank money trade economy and a long tail of words to truncate here",
    "football game",
    "a",
    "team player ball win lose the game in the park on a sunny day",
    "dog",
]


def sharprecl(tiny_bert_dir, **params):
    # tests/_helpers.py's fast settings for a random tiny BERT, one epoch
    return make_sharprecl(tiny_bert_dir, **{"max_epochs": 1, **params})


def knnbert(tiny_bert_dir, **params):
    # tests/_helpers.py's fast settings, one epoch, with dropout (inference turns it off)
    return make_knnbert(tiny_bert_dir, **{"max_epochs": 1, "dropout": 0.1, **params})


@pytest.fixture(scope="module")
def fitted_sharprecl(tiny_bert_dir):
    X, y = topic_texts((12, 6, 3))
    return sharprecl(tiny_bert_dir).fit(X, y)


@pytest.fixture(scope="module")
def fitted_knnbert(tiny_bert_dir):
    X, y = topic_texts((12, 6, 3))
    return knnbert(tiny_bert_dir).fit(X, y)


def torch_and_onnx(clf, method, X, onnx_path=None, **backend):
    """``clf.<method>(X)`` with torch, then with ONNX Runtime (the backend is reset)."""
    clf.set_inference_backend("torch")
    want = getattr(clf, method)(X)
    clf.set_inference_backend("onnx", onnx_path=onnx_path, **backend)
    try:
        got = getattr(clf, method)(X)
    finally:
        clf.set_inference_backend("torch")
    return want, got


def test_export_writes_graph_with_dynamic_axes_and_metadata(fitted_sharprecl, tmp_path):
    path = fitted_sharprecl.export_onnx(tmp_path / "sub" / "model.onnx")
    assert path.is_file()
    model = OnnxTextModel(path, n_threads=1)
    assert model.input_names == ["input_ids", "attention_mask"]
    assert model.output_names == ["embeddings", "logits"]
    for node in model.session.get_inputs():
        assert node.type == "tensor(int64)"
        assert all(isinstance(d, str) for d in node.shape)  # batch and sequence are dynamic
    shapes = {o.name: o.shape for o in model.session.get_outputs()}
    assert isinstance(shapes["logits"][0], str) and shapes["logits"][1] == 3
    assert model.metadata["estimator"] == "SharpReCLClassifier"
    assert model.metadata["pooling"] == "mean"
    assert len(model.metadata["weights_sha256"]) == 64
    assert model.metadata["max_length"] == "16"
    assert json.loads(model.metadata["classes"]) == ["econ", "pet", "sport"]


@pytest.mark.parametrize("method", ["transform", "predict_proba", "decision_function"])
def test_sharprecl_onnx_outputs_equal_torch(fitted_sharprecl, tmp_path, method):
    path = fitted_sharprecl.export_onnx(tmp_path / "model.onnx")
    want, got = torch_and_onnx(fitted_sharprecl, method, QUERIES, onnx_path=path)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_sharprecl_predict_equal_and_backend_state(fitted_sharprecl):
    clf = fitted_sharprecl
    assert clf.inference_backend_ == "torch"
    want = clf.predict(QUERIES)
    assert clf.set_inference_backend("onnx", n_threads=1) is clf  # exported in memory
    assert clf.inference_backend_ == "onnx"
    try:
        np.testing.assert_array_equal(clf.predict(QUERIES), want)
    finally:
        clf.set_inference_backend("torch")
    assert clf.inference_backend_ == "torch"


@pytest.fixture(scope="module")
def sharprecl_onnx(fitted_sharprecl, tmp_path_factory):
    return fitted_sharprecl.export_onnx(tmp_path_factory.mktemp("onnx") / "model.onnx")


@pytest.mark.parametrize("batch_size", [1, 2, 5, 15])
def test_dynamic_batch_sizes_and_lengths(fitted_sharprecl, sharprecl_onnx, batch_size):
    # 15 texts of 3 to 16 tokens: batch_size=1 runs every length without padding, the
    # others padded batches of mixed lengths (and a last, smaller batch).
    from skxmc.text._encoder import batched_inference

    module = fitted_sharprecl.module_.eval()
    tokens = fitted_sharprecl._tokenize(QUERIES * 2 + ["cat"])
    assert tokens.lengths.min() == 3 and tokens.lengths.max() == 16
    model = OnnxTextModel(sharprecl_onnx, n_threads=1)
    got = model.run(tokens, ["embeddings", "logits"], batch_size=batch_size)
    want = batched_inference(
        lambda inputs: torch.cat([module.embed(inputs), module.logits(inputs)], dim=1),
        tokens,
        batch_size=batch_size,
        device="cpu",
    )
    assert got.shape == want.shape == (15, 32 + 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_graph_served_with_tokenizer_and_metadata_only(fitted_sharprecl, tmp_path):
    # Serving without skxmc: the saved tokenizer's padded numpy arrays go straight in, and
    # the metadata gives max_length and the classes of the logits' columns.
    clf = fitted_sharprecl
    path = clf.export_onnx(tmp_path / "model.onnx")
    clf.tokenizer_.save_pretrained(str(tmp_path / "tokenizer"))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "tokenizer"))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    enc = tokenizer(
        QUERIES,
        padding=True,
        truncation=True,
        max_length=int(meta["skxmc.max_length"]),
        return_tensors="np",
    )
    feed = {name: enc[name].astype(np.int64) for name in ("input_ids", "attention_mask")}
    embeddings, logits = session.run(["embeddings", "logits"], feed)
    np.testing.assert_allclose(embeddings, clf.transform(QUERIES), rtol=0, atol=ATOL)
    np.testing.assert_allclose(logits, clf.decision_function(QUERIES), rtol=0, atol=ATOL)
    classes = np.array(json.loads(meta["skxmc.classes"]))
    np.testing.assert_array_equal(classes[logits.argmax(axis=1)], clf.predict(QUERIES))


def test_knnbert_transform_and_predict_proba_equal_torch(fitted_knnbert, tmp_path):
    # Its embeddings are the normalised projection (not the pooled features), and its
    # predict_proba mixes the softmax with kNN votes over those embeddings.
    path = fitted_knnbert.export_onnx(tmp_path / "knn.onnx")
    assert OnnxTextModel(path).metadata["embeddings_method"] == "embed"
    want, got = torch_and_onnx(fitted_knnbert, "transform", QUERIES, onnx_path=path)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    want, got = torch_and_onnx(fitted_knnbert, "predict_proba", QUERIES, onnx_path=path)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_text_pairs_export_token_type_ids(tiny_bert_dir, tmp_path):
    X, y = topic_texts((6, 6, 6))
    pairs = [(t, "label text") for t in X]
    clf = sharprecl(tiny_bert_dir, max_steps=2).fit(pairs, y)
    path = clf.export_onnx(tmp_path / "pairs.onnx")
    assert OnnxTextModel(path).input_names == ["input_ids", "attention_mask", "token_type_ids"]
    queries = [(q, "a second text") for q in QUERIES]
    want, got = torch_and_onnx(clf, "predict_proba", queries, onnx_path=path)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # torch.export internals
def test_dynamo_exporter(fitted_sharprecl, tmp_path):
    pytest.importorskip("onnxscript")
    path = fitted_sharprecl.export_onnx(tmp_path / "dynamo.onnx", dynamo=True)
    model = OnnxTextModel(path)
    assert model.input_names == ["input_ids", "attention_mask"]
    assert all(isinstance(d, str) for d in model.session.get_inputs()[0].shape)
    want, got = torch_and_onnx(fitted_sharprecl, "predict_proba", QUERIES, onnx_path=path)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_empty_input(fitted_sharprecl):
    fitted_sharprecl.set_inference_backend("onnx")
    try:
        assert fitted_sharprecl.transform([]).shape[0] == 0
        assert fitted_sharprecl.predict([]).shape == (0,)
    finally:
        fitted_sharprecl.set_inference_backend("torch")


def test_graph_of_another_model_is_refused(fitted_sharprecl, tiny_bert_dir, tmp_path):
    X, y = topic_texts((12, 6, 3))
    other = sharprecl(tiny_bert_dir, random_state=1, max_steps=2).fit(X, y)
    path = other.export_onnx(tmp_path / "other.onnx")
    with pytest.raises(ValueError, match="not an export of this fitted model.*weights_sha256"):
        fitted_sharprecl.set_inference_backend("onnx", onnx_path=path)
    assert fitted_sharprecl.inference_backend_ == "torch"


def test_refit_pickle_and_clone_return_to_torch(tiny_bert_dir):
    from sklearn.base import clone

    X, y = topic_texts((6, 6, 6))
    clf = sharprecl(tiny_bert_dir, max_steps=2).fit(X, y).set_inference_backend("onnx")
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(clf._onnx_model)
    restored = pickle.loads(pickle.dumps(clf))  # the estimator drops the session
    assert restored.inference_backend_ == "torch"
    np.testing.assert_allclose(restored.transform(X[:3]), clf.transform(X[:3]), atol=ATOL)
    assert clone(clf).set_params(training__max_steps=1).get_params()["training__max_steps"] == 1
    assert clf.fit(X, y).inference_backend_ == "torch"  # the session held the old weights


def test_bad_arguments(fitted_sharprecl, tmp_path):
    with pytest.raises(ValueError, match="backend must be 'onnx' or 'torch'"):
        fitted_sharprecl.set_inference_backend("tensorrt")
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        fitted_sharprecl.set_inference_backend("onnx", onnx_path=tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="n_threads"):
        fitted_sharprecl.set_inference_backend("onnx", n_threads=0)
    model = OnnxTextModel(fitted_sharprecl.export_onnx(tmp_path / "m.onnx"))
    with pytest.raises(ValueError, match="no output for 'features'"):
        model.outputs_for("features")


def test_not_fitted_raises(tiny_bert_dir, tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        sharprecl(tiny_bert_dir).export_onnx(tmp_path / "m.onnx")
    with pytest.raises(NotFittedError):
        sharprecl(tiny_bert_dir).set_inference_backend("onnx")


@pytest.fixture
def no_onnxruntime(monkeypatch):
    """Make ``import onnxruntime`` fail, as on a machine without it (a ``None`` entry in
    ``sys.modules`` raises ModuleNotFoundError for that name, whatever imports it)."""
    import sys

    for name in [m for m in sys.modules if m == "onnxruntime" or m.startswith("onnxruntime.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)


def test_missing_onnxruntime_names_the_extra(fitted_sharprecl, tmp_path, no_onnxruntime):
    install = r"pip install 'skxmc\[onnx\]'"
    with pytest.raises(ImportError, match=install):
        fitted_sharprecl.set_inference_backend("onnx")
    with pytest.raises(ImportError, match=f"verify=True.*{install}"):
        fitted_sharprecl.export_onnx(tmp_path / "m.onnx")
    # Exporting without the check needs onnx only.
    assert fitted_sharprecl.export_onnx(tmp_path / "m.onnx", verify=False).is_file()
    assert fitted_sharprecl.inference_backend_ == "torch"


@pytest.mark.filterwarnings("ignore:XRLinearClassifier kept no feature weight")
def test_matchxml_exports_its_encoder(tiny_bert_dir, tmp_path):
    # MatchXML exports its matcher's encoder: the graph's embeddings are the
    # pooled features that, L2-normalised, join its ranker's input.
    from skxmc.matchxml import MatchXMLClassifier, MultiStageMatcher

    texts = [" ".join(t.split()[:4]) for t in QUERIES * 4]
    labels = [["a"] if i % 2 else ["b", "c"] for i in range(len(texts))]
    matcher = MultiStageMatcher(
        encoder=str(tiny_bert_dir),
        max_length=16,
        label_embedding="pifa",
        max_leaf_size=2,
        branching_factor=2,
        training=TrainingConfig(batch_size=8, max_epochs=1),
    )
    clf = MatchXMLClassifier(matcher=matcher, device="cpu", random_state=0).fit(texts, labels)
    path = clf.export_onnx(tmp_path / "matchxml.onnx")
    model = OnnxTextModel(path, n_threads=1)
    assert model.output_names == ["embeddings"]
    assert model.metadata["embeddings_method"] == "features"
    tokens = clf.matcher_._tokenize(QUERIES)
    got = model.run(tokens, model.outputs_for("features"), batch_size=3)
    want = clf.matcher_._embed(tokens, torch.device("cpu"), "encoding")
    got /= np.linalg.norm(got, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
    # predict through ONNX Runtime: the same rankings as torch
    expected = clf.predict_topk(QUERIES, k=2)
    clf.set_inference_backend("onnx", onnx_path=path, n_threads=1)
    labels, scores = clf.predict_topk(QUERIES, k=2)
    np.testing.assert_array_equal(labels, expected[0])
    np.testing.assert_allclose(scores, expected[1], rtol=0, atol=ATOL)
