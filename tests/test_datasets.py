"""Data loaders: JSON lines and the XC repository format, on real files and malformed ones."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from sklearn.utils.multiclass import type_of_target

from skxmc.datasets import get_data_dir, load_demo, load_text_jsonl, load_xc_bow

from ._helpers import dataset_path


def _write(tmp_path, name, text, gz=False):
    path = tmp_path / name
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_multilabel_and_gzip_detected_by_content(tmp_path):
    body = '{"text": "a", "labels": ["x", "y"]}\n\n{"text": "b", "labels": []}\n'
    for path in (_write(tmp_path, "a.jsonl", body), _write(tmp_path, "b.data", body, gz=True)):
        texts, labels = load_text_jsonl(path)
        assert texts == ["a", "b"]
        assert labels.dtype == object and labels.shape == (2,)
        assert labels.tolist() == [frozenset({"x", "y"}), frozenset()]


def test_jsonl_single_label_returns_array(tmp_path):
    path = _write(tmp_path, "s.jsonl", '{"text": "a", "label": 3}\n{"text": "b", "label": 1}\n')
    _texts, labels = load_text_jsonl(path)
    assert isinstance(labels, np.ndarray)
    assert labels.tolist() == [3, 1]


def test_jsonl_pairs(tmp_path):
    path = _write(tmp_path, "p.jsonl", '{"text": "a", "text_pair": "b", "label": "yes"}\n')
    texts, _labels = load_text_jsonl(path)
    assert texts == [("a", "b")]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('{"text": "a", "labels": ["x"]}\nnot json\n', "line 2 is not valid JSON"),
        ("[1, 2]\n", "line 1 is not a JSON object"),
        ('{"text": 3, "labels": []}\n', "line 1: field 'text' must be a string"),
        ('{"text": "a"}\n', "line 1: the record has neither 'labels' nor 'label'"),
        ('{"text": "a", "labels": "x"}\n', "line 1: 'labels' must be a list"),
        ('{"text": "a", "label": ["x"]}\n', "line 1: 'label' must be a single label"),
        ('{"text": "a", "label": "x"}\n{"text": "b", "labels": ["x"]}\n', "line 2: mixes"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path, body, match):
    with pytest.raises(ValueError, match=match):
        load_text_jsonl(_write(tmp_path, "bad.jsonl", body))


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_text_jsonl(tmp_path / "nope.jsonl")


def test_xc_bow_small_file(tmp_path):
    path = _write(tmp_path, "t.txt", "3 4 3\n0,2 0:1 3:0.5\n 1:2\n1,1 2:1\n")
    X, Y = load_xc_bow(path)
    assert X.dtype == np.float32 and Y.dtype == np.float32
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 0, 0.5], [0, 2, 0, 0], [0, 0, 1, 0]])
    np.testing.assert_array_equal(Y.toarray(), [[1, 0, 1], [0, 0, 0], [0, 1, 0]])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("2 3\n0 0:1\n", "line 1 must be the header"),
        ("2 3 2\n0 0:1\n", "declares 2 points but the file has 1"),
        ("1 3 2\n0 0:1\n1 1:1\n", "declares 1 points but the file has 2"),
        ("1 3 2\n5 0:1\n", "line 2 has a label id outside"),
        ("1 3 2\n0 7:1\n", "line 2 has a feature id outside"),
        ("2 3 2\n0 0:1\n1 x:1\n", "line 3 is malformed"),
        ("2 3 2\n0 0:1\n\n", "line 3 is empty"),
    ],
)
def test_xc_bow_errors_name_the_line(tmp_path, body, match):
    with pytest.raises(ValueError, match=match):
        load_xc_bow(_write(tmp_path, "bad.txt", body))


def test_xc_bow_real_file_matches_header(data_dir):
    path = dataset_path(data_dir, "bibtex_bow", "train.txt")
    X, Y = load_xc_bow(path)
    n, d, L = (int(v) for v in path.open().readline().split())
    assert X.shape == (n, d) and Y.shape == (n, L)
    assert X.has_sorted_indices and Y.nnz > n


def test_text_jsonl_real_files(data_dir):
    manifest = json.loads(dataset_path(data_dir, "manifest.json").read_text())
    texts, labels = load_text_jsonl(dataset_path(data_dir, "reuters21578_allcats", "test.jsonl.gz"))
    assert len(texts) == len(labels) > 1000
    assert all(isinstance(t, str) for t in texts)
    assert manifest  # the manifest is readable JSON
    texts, labels = load_text_jsonl(dataset_path(data_dir, "trec", "test.jsonl.gz"))
    assert labels.ndim == 1 and len(set(labels.tolist())) == 6


def test_get_data_dir_honours_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SKXMC_DATA", str(tmp_path))
    assert get_data_dir() == tmp_path


def test_demo_data_ships_with_the_package():
    demo = load_demo()
    assert len(demo.train_texts) == 6000 and len(demo.test_texts) == 1500
    # label sets: the form sklearn's default cv accepts (issue 17)
    assert all(isinstance(r, frozenset) for r in demo.train_labels)
    assert type_of_target(demo.train_labels) == "unknown"
    assert "CC BY-SA 4.0" in demo.description
