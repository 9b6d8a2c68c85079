"""``skxmc fit --estimator ... --params ...`` for every estimator, ``skxmc info``, ``skxmc
warmup``, the model card of ``skxmc.save`` and loading from the local Hugging Face cache.

The text estimators run on the session's tiny random BERT (``tiny_bert_dir``) for one or
two steps: these tests check the command line's plumbing, not the models' quality.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import skxmc
from skxmc import XRLinearClassifier
from skxmc.cli import main
from skxmc.io import CARD_NAME, CONFIG_NAME, MANIFEST_KEY, describe
from skxmc.pipeline import Pipeline, make_pipeline
from skxmc.text._config import TRAINING_FIELDS

from ._helpers import TOPICS, topic_texts

SKXMC = [sys.executable, "-m", "skxmc"]

# Constructor parameters that make each estimator fit in about a second on the toy data.
TINY_BERT = dict(pooling="mean", max_length=16, batch_size=8, random_state=0, device="cpu")
PARAMS = {
    "xrlinear": {"beam_size": 3, "top_k": 4},
    "snm": dict(hidden_size=16, embedding_size=8, max_epochs=2, n_sampled=4, device="cpu"),
    "matchxml": dict(
        TINY_BERT,
        max_epochs=1,
        max_steps=2,
        label_embedding="pifa",
        max_leaf_size=2,
        branching_factor=2,
        top_k=4,
    ),
    "sharprecl": dict(
        TINY_BERT,
        max_epochs=1,
        max_steps=2,
        n_synthetic_negative=4,
        n_synthetic_positive=2,
        n_hard=2,
        projection_dim=8,
    ),
    "knnbert": dict(
        TINY_BERT,
        max_epochs=1,
        max_steps=2,
        queue_size=16,
        n_enqueue_per_anchor=2,
        n_most_similar=3,
        n_neighbors=3,
    ),
}
TEXT_ESTIMATORS = ("matchxml", "sharprecl", "knnbert")
MULTI_CLASS = ("sharprecl", "knnbert")
CLASS_NAMES = {
    "xrlinear": "XRLinearClassifier",
    "snm": "SNMClassifier",
    "matchxml": "MatchXMLClassifier",
    "sharprecl": "SharpReCLClassifier",
    "knnbert": "KNNBertClassifier",
}


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Toy single-label and multi-label JSON-lines files over three topics."""
    root = tmp_path_factory.mktemp("cli-estimators")
    texts, labels = topic_texts((10, 8, 6))
    single = _write_jsonl(
        root / "single.jsonl", [{"text": t, "label": str(y)} for t, y in zip(texts, labels)]
    )
    names = list(TOPICS)
    multi_records = [
        # every third text also gets the next topic, so records hold one or two labels
        {"text": t, "labels": [str(y)] + ([names[(names.index(y) + 1) % 3]] if i % 3 == 0 else [])}
        for i, (t, y) in enumerate(zip(texts, labels))
    ]
    multi = _write_jsonl(root / "multi.jsonl", multi_records)
    return root, single, multi


def _params_file(root, name, tiny_bert_dir, **extra):
    params = dict(PARAMS[name], **extra)
    if name in TEXT_ESTIMATORS:
        params["encoder"] = str(tiny_bert_dir)
    path = root / f"{name}-params.json"
    path.write_text(json.dumps(params), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", list(PARAMS))
def test_fit_predict_info_with_each_estimator(name, data, tiny_bert_dir, tmp_path, capsys):
    _, single, multi = data
    train = single if name in MULTI_CLASS else multi
    params = _params_file(tmp_path, name, tiny_bert_dir)
    model = tmp_path / "model"
    argv = ["fit", "--estimator", name, "--params", str(params), "--train", str(train)]
    tfidf = ["--min-df", "1"] if name in ("xrlinear", "snm") else []  # a TF-IDF option
    assert main([*argv, "--model-dir", str(model), *tfidf]) == 0
    out = capsys.readouterr().out
    assert f"trained {CLASS_NAMES[name]} on 24 samples, 3 labels" in out

    # skxmc.load verifies every file of the manifest, the model card included
    loaded = skxmc.load(model)
    final = loaded[-1] if isinstance(loaded, Pipeline) else loaded
    assert type(final).__name__ == CLASS_NAMES[name]
    assert isinstance(loaded, Pipeline) == (name in ("xrlinear", "snm"))
    assert CARD_NAME in json.loads((model / CONFIG_NAME).read_text())[MANIFEST_KEY]

    card = (model / CARD_NAME).read_text(encoding="utf-8")
    assert card.startswith("---\nlibrary_name: skxmc\n")
    assert f"# {CLASS_NAMES[name]}" in card and "| labels | 3 |" in card
    # the non-default parameters, from --params
    shown = {"xrlinear": "beam_size", "snm": "hidden_size", "knnbert": "queue_size"}
    key = shown.get(name, "max_steps")
    # training settings belong to the estimator's TrainingConfig, MatchXML's fine-tuning
    # parameters to its matcher: --params may give them flat
    spelled = f"training__{key}" if key in TRAINING_FIELDS else key
    spelled = f"matcher__{spelled}" if name == "matchxml" else spelled
    assert f"| `{spelled}` | `{PARAMS[name][key]}` |" in card
    assert f"`{train.name}`: 24 records" in card and "--estimator " + name in card

    preds = tmp_path / "preds.jsonl"
    argv = ["predict", "--model-dir", str(model), "--input", str(train), "--output", str(preds)]
    assert main([*argv, "--top-k", "2"]) == 0
    lines = _read_jsonl(preds)
    assert len(lines) == 24
    assert all(len(r["labels"]) == 2 and len(r["scores"]) == 2 for r in lines)
    assert all(r["scores"] == sorted(r["scores"], reverse=True) for r in lines)
    assert {lab for r in lines for lab in r["labels"]} <= set(TOPICS)
    if name in MULTI_CLASS:
        # one class per text, as predict(); "scores" are probabilities, best first
        texts = [r["text"] for r in _read_jsonl(train)]
        assert [r["label"] for r in lines] == [r["labels"][0] for r in lines]
        proba = loaded.predict_proba(texts)
        np.testing.assert_allclose([r["scores"][0] for r in lines], proba.max(axis=1), atol=1e-5)
    else:
        assert all("label" not in r for r in lines)
    # evaluate takes the predictions of every model
    capsys.readouterr()
    assert main(["evaluate", "--true", str(train), "--pred", str(preds), "--ks", "1,2"]) == 0
    assert "| P |" in capsys.readouterr().out

    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert CLASS_NAMES[name] in out and "labels:     3" in out
    assert "README.md" in out and "skxmc-model.json" in out and "saved with: skxmc" in out
    assert ("multi-class" if name in MULTI_CLASS else "multi-label") in out

    # explain: XR-Linear and MatchXML by paths and features, SharpReCL and KNN-BERT by
    # neighbours, SNM not
    why = tmp_path / "why.jsonl"
    argv = ["explain", "--model-dir", str(model), "--input", str(train), "--output", str(why)]
    by_paths, by_neighbors = ("xrlinear", "matchxml"), ("sharprecl", "knnbert")
    if name not in by_paths + by_neighbors:
        assert main([*argv, "--k", "2"]) == 1
        assert "has no explain" in capsys.readouterr().err
        return
    assert main([*argv, "--k", "2"]) == 0
    lines = _read_jsonl(why)
    assert [[e["label"] for e in r["explanations"]] for r in lines] == [
        r["labels"] for r in _read_jsonl(preds)
    ]
    field = "path" if name in by_paths else "neighbors"
    assert all(field in e for r in lines for e in r["explanations"])
    if name == "matchxml":
        assert all("tfidf" in e["blocks"] for r in lines for e in r["explanations"])
    if name in by_neighbors:
        assert main([*argv, "--features", "2"]) == 1
        assert "--features does not apply" in capsys.readouterr().err
    if name == "sharprecl":
        assert main([*argv, "--k", "1", "--neighbors", "2"]) == 0
        rows = [r["explanations"][0]["neighbors"] for r in _read_jsonl(why)]
        assert all(len(n) == 2 for n in rows)
        # a training text is the nearest of its class's texts to itself (or a copy)
        records = _read_jsonl(train)
        own = [
            i
            for i, line in enumerate(_read_jsonl(why))
            if line["explanations"][0]["label"] == records[i]["label"]
        ]
        assert own
        for i in own:
            assert records[rows[i][0]["training_row"]]["text"] == records[i]["text"]
            assert rows[i][0]["similarity"] == pytest.approx(1.0, abs=1e-5)
    else:
        assert main([*argv, "--neighbors", "2"]) == 1
        assert "--neighbors does not apply" in capsys.readouterr().err


def test_multi_class_estimator_refuses_multi_label_records(data, tiny_bert_dir, tmp_path, capsys):
    _, _, multi = data
    params = _params_file(tmp_path, "sharprecl", tiny_bert_dir)
    argv = ["fit", "--estimator", "sharprecl", "--params", str(params), "--train", str(multi)]
    assert main([*argv, "--model-dir", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "skxmc fit: error:" in err and "multi.jsonl" in err
    assert "multi-class" in err and "record 1 has 2" in err and '"label"' in err
    assert not (tmp_path / "m").exists()


def test_multi_label_file_with_one_label_each_trains_a_multi_class_model(
    data, tiny_bert_dir, tmp_path, capsys
):
    _, single, _ = data
    one_each = _write_jsonl(
        tmp_path / "one.jsonl",
        [{"text": r["text"], "labels": [r["label"]]} for r in _read_jsonl(single)],
    )
    params = _params_file(tmp_path, "knnbert", tiny_bert_dir)
    argv = ["fit", "--estimator", "knnbert", "--params", str(params), "--train", str(one_each)]
    assert main([*argv, "--model-dir", str(tmp_path / "m")]) == 0
    assert list(skxmc.load(tmp_path / "m").classes_) == sorted(TOPICS)


def test_single_label_file_trains_a_multi_label_model(data, tmp_path, capsys):
    # As before: a single label is a label set of one, nothing is lost.
    _, single, _ = data
    argv = ["fit", "--train", str(single), "--model-dir", str(tmp_path / "m"), "--min-df", "1"]
    assert main(argv) == 0
    assert "3 labels" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("estimator", "content", "extra", "expected"),
    [
        (
            "snm",
            '{"max_epochs": 1, "colour": "red"}',
            [],
            ["'colour'", "SNMClassifier", "it takes"],
        ),
        (
            "xrlinear",
            '{"beam_size": 0}',
            [],
            ["invalid parameter of XRLinearClassifier", "beam_size"],
        ),
        (
            "knnbert",
            '{"knn_weight": "lots"}',
            [],
            ["invalid parameter of KNNBertClassifier", "knn_weight"],
        ),
        ("matchxml", "[1, 2]", [], ["holds a JSON list", "expected an object"]),
        ("sharprecl", '{"max_epochs": 1,', [], ["is not valid JSON"]),
        ("snm", "{}", ["--beam-size", "3"], ["--beam-size does not apply to --estimator snm"]),
        ("sharprecl", "{}", ["--min-df", "1"], ["--min-df", "TF-IDF", "reads the texts"]),
    ],
    ids=[
        "unknown-key",
        "bad-value",
        "bad-type",
        "not-an-object",
        "bad-json",
        "option-not-applying",
        "tfidf-option-for-text-estimator",
    ],
)
def test_params_errors(estimator, content, extra, expected, data, tmp_path, capsys):
    _, single, _ = data
    params = tmp_path / "my-params.json"
    params.write_text(content, encoding="utf-8")
    argv = ["fit", "--estimator", estimator, "--params", str(params), "--train", str(single)]
    assert main([*argv, "--model-dir", str(tmp_path / "m"), *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("skxmc fit: error:") and "Traceback" not in err
    for part in expected:
        assert part in err, err
    if "--params '" in err:
        assert "my-params.json" in err  # the error names the file
    assert not (tmp_path / "m").exists()


def test_params_file_missing_and_unknown_estimator(data, tmp_path, capsys):
    _, single, _ = data
    argv = ["fit", "--train", str(single), "--model-dir", str(tmp_path / "m")]
    assert main([*argv, "--params", str(tmp_path / "nope.json")]) == 1
    assert "--params" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--estimator", "svm"])
    assert exc.value.code == 2


def test_verbose_gives_progress(data, tmp_path, capsys):
    _, _, multi = data
    argv = ["fit", "--train", str(multi), "--model-dir", str(tmp_path / "m"), "--min-df", "1"]
    assert main([*argv, "-v"]) == 0
    out, err = capsys.readouterr()
    # XR-Linear's verbose=1 progress lines, as log lines on stderr (stdout: the result)
    assert "skxmc.linear._xrlinear: layer 1/" in err and "layer 1/" not in out


# -- skxmc info ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_pipeline(data, tmp_path_factory):
    _, _, multi = data
    records = _read_jsonl(multi)
    pipe = make_pipeline(TfidfVectorizer(min_df=1), XRLinearClassifier(top_k=2, beam_size=4))
    pipe.fit([r["text"] for r in records], [r["labels"] for r in records])
    directory = tmp_path_factory.mktemp("saved") / "model"
    skxmc.save(pipe, directory)
    return directory, pipe


def test_info_json_and_describe_read_no_weights(saved_pipeline, capsys, monkeypatch):
    directory, pipe = saved_pipeline

    def no_loading(*args, **kwargs):
        raise AssertionError("info must not load the model")

    monkeypatch.setattr(np, "load", no_loading)
    assert main(["info", str(directory), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["estimator"] == "Pipeline(TfidfVectorizer, XRLinearClassifier)"
    assert info["n_labels"] == 3 and info["n_features"] == len(pipe[0].vocabulary_)
    assert info["steps"][1]["params"] == {"beam_size": 4, "top_k": 2}  # the non-default ones
    assert info["steps"][0]["params"] == {}  # TfidfVectorizer(min_df=1) is all defaults
    assert set(info["files"]) == {CONFIG_NAME, "arrays.npz"} and not info["model_card"]
    assert info["total_size"] == sum(p.stat().st_size for p in directory.iterdir())
    assert info == describe(str(directory)) | {"path": info["path"]}


def test_info_errors(tmp_path, capsys):
    assert main(["info", str(tmp_path)]) == 1
    assert "skxmc info: error: no skxmc model in" in capsys.readouterr().err
    (tmp_path / CONFIG_NAME).write_text("{not json")
    assert main(["info", str(tmp_path)]) == 1
    assert "is not valid JSON" in capsys.readouterr().err


# -- the model card --------------------------------------------------------------------------


def test_model_card_of_save(saved_pipeline, tmp_path):
    _, pipe = saved_pipeline
    directory = tmp_path / "carded"
    card = {"data_description": "Toy *topics*, 24 texts.", "metrics": {"P@1": 0.75, "nDCG@3": 1}}
    skxmc.save(pipe, directory, model_card=card)
    text = (directory / CARD_NAME).read_text(encoding="utf-8")
    front = text.split("---\n")[1]
    assert "library_name: skxmc" in front and "- extreme-multi-label-classification" in front
    assert "`beam_size` | `4`" in text and "`top_k` | `2`" in text
    assert "## Training data\n\nToy *topics*, 24 texts." in text
    assert "| `P@1` | 0.75 |" in text and "| `nDCG@3` | 1 |" in text
    assert skxmc.load(directory).predict_topk(["cat dog"])[0].shape == (1, 2)
    # the card is a file of the model: a changed one fails load's verification ...
    (directory / CARD_NAME).write_text(text.replace("Toy", "Big"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"README\.md is not the file that was saved"):
        skxmc.load(directory)
    # ... and overwrite replaces it (it belongs to the model, unlike a user's own files)
    skxmc.save(pipe, directory, overwrite=True)
    assert not (directory / CARD_NAME).exists()
    skxmc.load(directory)
    # the estimator's own save takes it too
    pipe[-1].save(tmp_path / "ranker", model_card=True)
    assert "# XRLinearClassifier" in (tmp_path / "ranker" / CARD_NAME).read_text()


@pytest.mark.parametrize(
    ("card", "error", "match"),
    [
        ({"metrics": {"P@1": 0.5}, "licence": "mit"}, ValueError, "unknown key.*'licence'"),
        ({"metrics": {"P@1": "high"}}, ValueError, r"metrics'\]\['P@1'\] must be a number"),
        ({"metrics": [0.5]}, ValueError, "must be a dict"),
        ({"data_description": 3}, ValueError, "data_description'\\] must be a str"),
        ("yes", TypeError, "model_card must be None, a bool or a dict"),
    ],
)
def test_model_card_errors_write_nothing(saved_pipeline, tmp_path, card, error, match):
    _, pipe = saved_pipeline
    with pytest.raises(error, match=match):
        skxmc.save(pipe, tmp_path / "m", model_card=card)
    assert not (tmp_path / "m").exists()


def test_cli_fit_overwrite_keeps_users_readme_safe(data, tmp_path, capsys):
    # A README.md of the user's next to a model saved without a card is not the model's.
    _, _, multi = data
    model = tmp_path / "m"
    argv = ["fit", "--train", str(multi), "--model-dir", str(model), "--min-df", "1"]
    assert main(argv) == 0
    config = json.loads((model / CONFIG_NAME).read_text())
    del config[MANIFEST_KEY][CARD_NAME]
    (model / CONFIG_NAME).write_text(json.dumps(config))
    (model / CARD_NAME).write_text("my notes", encoding="utf-8")
    assert main([*argv, "--overwrite"]) == 1
    assert "README.md" in capsys.readouterr().err
    assert (model / CARD_NAME).read_text() == "my notes"


# -- loading from the local Hugging Face cache -----------------------------------------------


def _fake_hub_cache(cache, repo_id, model_dir, revision="0123456789abcdef0123456789abcdef01234567"):
    """``model_dir`` laid out as huggingface_hub caches a download of ``repo_id``: blobs,
    a snapshot of symbolic links to them, and ``refs/main``."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    for path in sorted(model_dir.rglob("*")):
        if path.is_file():
            blob = repo / "blobs" / f"blob-{abs(hash(str(path)))}"
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, blob)
            link = snapshot / path.relative_to(model_dir)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def test_load_from_the_hugging_face_cache(saved_pipeline, tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    _, pipe = saved_pipeline
    carded = tmp_path / "carded"
    skxmc.save(pipe, carded, model_card=True)
    cache = tmp_path / "hub"
    snapshot = _fake_hub_cache(cache, "someone/tiny-xmc", carded)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # no folder "someone/tiny-xmc" here
    loaded = skxmc.load("someone/tiny-xmc")
    texts = ["cat dog mat", "stock market bank"]
    assert loaded.predict_topk(texts)[0].tolist() == pipe.predict_topk(texts)[0].tolist()
    assert describe("someone/tiny-xmc")["path"] == str(snapshot.resolve())
    # the command line takes the id wherever it takes a model directory
    capsys.readouterr()
    assert main(["info", "someone/tiny-xmc"]) == 0
    assert "Pipeline(TfidfVectorizer, XRLinearClassifier)" in capsys.readouterr().out
    # an existing folder of that name wins over the cache
    (tmp_path / "someone" / "tiny-xmc").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="skxmc-model.json is missing"):
        skxmc.load("someone/tiny-xmc")


def test_cli_reads_the_cache_named_by_hf_hub_cache(saved_pipeline, tmp_path):
    directory, pipe = saved_pipeline
    cache = tmp_path / "hub"
    _fake_hub_cache(cache, "someone/tiny-xmc", directory)
    texts = tmp_path / "texts.jsonl"
    _write_jsonl(texts, [{"text": "cat dog mat"}])
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [*SKXMC, "predict", "--model-dir", "someone/tiny-xmc", "--input", str(texts)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["labels"] == pipe.predict_topk(["cat dog mat"])[0][0].tolist()


def test_not_cached_says_how_to_download(tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as exc:
        skxmc.load("someone/not-downloaded")
    message = str(exc.value)
    assert "'someone/not-downloaded'" in message and "no such directory" in message
    assert "local cache" in message and "snapshot_download('someone/not-downloaded')" in message
    assert "hf download someone/not-downloaded" in message
    assert main(["info", "someone/not-downloaded"]) == 1
    assert (
        "skxmc info: error: no skxmc model in 'someone/not-downloaded'" in capsys.readouterr().err
    )
    # paths never go to the hub: a path-like, or a string that is no repository id
    with pytest.raises(FileNotFoundError, match="skxmc-model.json is missing"):
        skxmc.load(tmp_path / "someone" / "not-downloaded")
    with pytest.raises(FileNotFoundError, match="skxmc-model.json is missing"):
        skxmc.load("no/such/dir")


# -- skxmc warmup ----------------------------------------------------------------------------


def test_warmup_calls_the_numba_warmup(monkeypatch, capsys):
    from skxmc import _warmup

    calls = []

    def warmup(*, verbose=0):
        calls.append(verbose)
        return {"seconds": 0.5, "compiled": 3, "loaded": 7, "kernels": 10}

    monkeypatch.setattr(_warmup, "warmup", warmup, raising=False)
    assert main(["warmup", "-v"]) == 0
    assert calls == [1]
    out = capsys.readouterr().out
    assert "numba kernels are ready" in out and "3 signature(s) compiled, 7 loaded" in out


def test_warmup_without_the_function_errors_clearly(monkeypatch, capsys):
    from skxmc import _warmup

    monkeypatch.delattr(_warmup, "warmup", raising=False)
    assert main(["warmup"]) == 1
    assert "skxmc warmup: error:" in capsys.readouterr().err
