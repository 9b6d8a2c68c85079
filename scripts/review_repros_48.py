"""Re-run the reviews' repro commands of issue 48 (items 1-5 and 9-16) and print, for each,
what happens now.

The reviews (``../shared/reviews/sklearn-api.md`` P1-P10 and ``reliability.md``'s BAD and
WEAK table, at 26aef59) give a minimal repro per defect; this script runs each of them as
written, on the data slices the reviews used (reuters21578_modapte90, a tiny random BERT),
and prints one line per repro: ``OK`` when the new behaviour is the one issue 48 asks for,
``STILL`` when the old one remains. The tests (named in each line) are what keep the
behaviour; this script is the reviewers' view of it, run by hand::

    SKXMC_DATA=../shared/data python scripts/review_repros_48.py

It writes only into a temporary folder, and exits 1 if any repro shows the old behaviour.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np

RESULTS: list[tuple[str, bool, str]] = []


def case(name: str) -> Callable:
    def wrap(fn: Callable[[], str]) -> Callable:
        try:
            RESULTS.append((name, True, fn()))
        except AssertionError as e:
            RESULTS.append((name, False, str(e)))
        except Exception as e:  # an unexpected error is the old behaviour or a new defect
            RESULTS.append((name, False, f"{type(e).__name__}: {e}"))
        return fn

    return wrap


def raises(fn: Callable[[], object], *words: str) -> str:
    try:
        fn()
    except Exception as e:  # the message is what is checked
        msg = f"{type(e).__name__}: {e}"
        missing = [w for w in words if w not in msg]
        assert not missing, f"error lacks {missing}: {msg[:300]}"
        return msg.splitlines()[0][:160]
    raise AssertionError("no error")


def reuters(n: int = 300):
    from skxmc.datasets import get_data_dir, load_text_jsonl

    texts, labels = load_text_jsonl(get_data_dir() / "reuters21578_modapte90" / "train.jsonl.gz")
    return list(texts[:n]), labels[:n]


def dense(a):
    import scipy.sparse as sp

    return a.toarray() if sp.issparse(a) else np.asarray(a)


def tiny_bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in reuters(200)[0] for w in t.lower().split() if w.isalpha()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words[:400]]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def main() -> int:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.model_selection import cross_val_predict, cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MultiLabelBinarizer

    import skxmc
    from skxmc import SharpReCLClassifier, SNMClassifier, XRLinearClassifier, as_label_sets
    from skxmc.io import CONFIG_NAME, MANIFEST_KEY
    from skxmc.io._format import build_manifest
    from skxmc.text import TrainingConfig

    tmp = Path(tempfile.mkdtemp(prefix="repro48-"))
    texts, Y = reuters()
    Yd = MultiLabelBinarizer().fit_transform(Y)
    yb = Yd[:, Yd.sum(0).argmax()]
    bert = tiny_bert(tmp / "tiny-bert")
    train = TrainingConfig(max_epochs=1, batch_size=16, device="cpu")

    def sharp(**kw):
        return SharpReCLClassifier(**{"encoder": str(bert), "training": train, **kw})

    def first_labels(n: int) -> list[str]:
        # a multi-class target for SharpReCL: each text's first label
        return [min(y) if len(y) else "none" for y in Y[:n]]

    def rehash(d: Path) -> None:
        config = json.loads((d / CONFIG_NAME).read_text())
        config[MANIFEST_KEY] = build_manifest(d)
        (d / CONFIG_NAME).write_text(json.dumps(config))

    @case("1 (n,1) 0/1 target (P1; tests/test_target_forms.py)")
    def _():
        from sklearn.exceptions import DataConversionWarning

        p = make_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            share = p.fit(texts, yb.reshape(-1, 1)).predict(texts).mean()
        assert any(issubclass(x.category, DataConversionWarning) for x in w), "no warning"
        assert share < 0.5, f"predicts 1 for {share:.0%} of rows (true {yb.mean():.0%})"
        return f"DataConversionWarning; predicted share {share:.3f} (true {yb.mean():.3f})"

    @case("1 df[['label']] of strings (P1; tests/test_target_forms.py)")
    def _():
        import pandas as pd

        df = pd.DataFrame({"label": np.where(yb == 1, "yes", "no")})
        p = make_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = p.fit(texts, df[["label"]]).predict(texts[:5])
        assert np.asarray(pred).ndim == 1, f"predict gives shape {np.shape(pred)}"
        return f"1-D labels: {list(pred)}"

    @case("2 NaN weights in a saved SharpReCL (reliability #1; tests/io)")
    def _():
        from safetensors.numpy import load_file, save_file

        m = sharp().fit(texts[:60], first_labels(60))
        d = tmp / "sharp"
        skxmc.save(m, d)
        tensors = load_file(d / "model.safetensors")
        name = next(k for k in tensors if k.startswith("classifier"))
        tensors[name][:] = np.nan
        save_file(tensors, d / "model.safetensors")
        rehash(d)
        return raises(lambda: skxmc.load(d), name)

    @case("3 SharpReCL mixed int/str labels (reliability #6; tests/test_sharprecl.py)")
    def _():
        return raises(
            lambda: sharp().fit(texts[:6], [1, "a", 1, "a", 2, "b"]), "Mix of label input types"
        )

    @case("4 manifest without `files`, arrays edited (reliability #9; tests/io)")
    def _():
        m = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y)
        d = tmp / "nofiles"
        skxmc.save(m, d)
        config = json.loads((d / CONFIG_NAME).read_text())
        config.pop(MANIFEST_KEY)
        (d / CONFIG_NAME).write_text(json.dumps(config))
        return raises(lambda: skxmc.load(d), "trusted")

    @case("5 XR-Linear on TF-IDF x 100 (reliability #3; tests/linear)")
    def _():
        X = TfidfVectorizer().fit_transform(texts) * 100
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return raises(lambda: XRLinearClassifier().fit(X, Y), "normal")

    @case("5 XR-Linear on X values of 1e30 (reliability #2; tests/linear)")
    def _():
        X = TfidfVectorizer().fit_transform(texts)
        X.data[:] = 1e30
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return raises(lambda: XRLinearClassifier().fit(X, Y), "normal")

    @case("9 'f1_samples' in cross_validate on label sets (P2; tests/test_target_forms.py)")
    def _():
        from skxmc.metrics import label_set_scorer, make_topk_scorer

        pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier())
        scoring = {"p1": make_topk_scorer("precision", k=1), "f1": label_set_scorer("f1_samples")}
        r = cross_validate(pipe, texts, as_label_sets(Y), cv=3, scoring=scoring)
        assert np.isfinite(r["test_f1"]).all(), f"test_f1 {r['test_f1']}"
        return f"test_p1 {np.round(r['test_p1'], 2)}, test_f1 {np.round(r['test_f1'], 2)}"

    @case("9 sklearn's f1_score on label sets names the fix (P2)")
    def _():
        from sklearn.metrics import f1_score

        clf = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y)
        return raises(
            lambda: f1_score(as_label_sets(Y), clf.predict(texts), average="samples"),
            "label_set_scorer",
        )

    @case("10 plain list of label lists in cross_val_score (P4): sklearn's own error")
    def _():
        from sklearn.model_selection import cross_val_score

        pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier())
        raises(lambda: cross_val_score(pipe, texts, [list(y) for y in Y]), "legacy")
        s = cross_val_score(pipe, texts, as_label_sets(Y))
        return f"still sklearn's 'legacy multi-label' error; as_label_sets(Y) scores {s.round(2)}"

    @case("11 cross_val_predict on label sets without classes= (P5; tests/test_target_forms)")
    def _():
        pipe = make_pipeline(TfidfVectorizer(), XRLinearClassifier())
        return raises(lambda: cross_val_predict(pipe, texts, as_label_sets(Y), cv=3), "classes")

    @case("12 sample_weight in fit and score (P9; tests/test_sample_weight.py)")
    def _():
        X = TfidfVectorizer().fit_transform(texts)
        w = np.ones(len(texts))
        w[:50] = 0
        # a zero-weight row's labels stay in classes_ (as in sklearn): fix the columns
        classes = sorted(set().union(*Y))
        a = XRLinearClassifier(classes=classes).fit(X, Y, sample_weight=w)
        b = XRLinearClassifier(classes=classes).fit(X[50:], Y[50:])
        same = np.array_equal(dense(a.decision_function(X)), dense(b.decision_function(X)))
        assert same, "weight 0 differs from dropping the rows"
        return f"weight 0 == dropping rows; score {a.score(X, Y, sample_weight=w):.3f}"

    @case("13 SNMClassifier on raw text (P7; tests/test_snm.py)")
    def _():
        return raises(lambda: SNMClassifier().fit(texts, Y), "TfidfVectorizer")

    @case("14 model.safetensors mode under umask 022 (P6; tests/io)")
    def _():
        old = os.umask(0o022)
        try:
            m = sharp().fit(texts[:60], first_labels(60))
            d = tmp / "perm"
            skxmc.save(m, d)
        finally:
            os.umask(old)
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in d.iterdir() if p.is_file()}
        assert set(modes.values()) == {"0o644"}, f"modes {modes}"
        return f"every file 0644: {sorted(modes)}"

    @case("15 save(overwrite=True) through a symlinked folder (reliability #10; tests/io)")
    def _():
        m = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y)
        real, link = tmp / "real", tmp / "link"
        skxmc.save(m, real)
        link.symlink_to(real)
        skxmc.save(m, link, overwrite=True)
        assert link.is_symlink(), "the link was replaced by a directory"
        return "the link stays a link; the target holds the new model"

    @case("16 lone surrogate in a text (reliability #4; tests/text)")
    def _():
        m = sharp().fit(texts[:60], first_labels(60))
        return raises(lambda: m.predict(["ok", "bad \ud800"]), "1")

    @case("16 n_synthetic_negative=10**7 (reliability #5; tests/test_sharprecl.py)")
    def _():
        est = sharp(n_synthetic_negative=10**7)
        labels = first_labels(60)
        return raises(lambda: est.fit(texts[:60], labels), "n_synthetic_negative")

    @case("16 100,000-deep JSON (reliability #8; tests/io)")
    def _():
        d = tmp / "deep"
        skxmc.save(make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y), d)
        (d / CONFIG_NAME).write_text('{"__dict__": ' * 100_000 + "1" + "}" * 100_000)
        return raises(lambda: skxmc.load(d), CONFIG_NAME)

    @case("16 load('dir/skxmc-model.json') (reliability #11; tests/io)")
    def _():
        d = tmp / "file"
        m = make_pipeline(TfidfVectorizer(), XRLinearClassifier()).fit(texts, Y)
        skxmc.save(m, d)
        same = np.array_equal(
            dense(skxmc.load(d / CONFIG_NAME).predict(texts)), dense(m.predict(texts))
        )
        assert same, "loaded model predicts differently"
        return "loads the folder of the file"

    @case("16 skxmc fit --train - (reliability #12; tests/test_cli.py)")
    def _():
        lines = "".join(json.dumps({"text": t, "labels": list(y)}) + "\n" for t, y in zip(texts, Y))
        cmd = [sys.executable, "-m", "skxmc", "fit", "--train", "-", "--model-dir"]
        r = subprocess.run(
            [*cmd, str(tmp / "cli")], input=lines, text=True, capture_output=True, timeout=600
        )
        assert r.returncode == 0, r.stderr[-400:]
        assert "UserWarning" not in r.stderr, f"raw warning: {r.stderr[-300:]}"
        return "reads the training set from stdin"

    @case("16 verbose=1: one progress style (P10; tests/test_logging.py)")
    def _():
        err = io.StringIO()
        with redirect_stderr(err):
            sharp(
                training=TrainingConfig(max_epochs=1, batch_size=16, device="cpu", verbose=1)
            ).fit(texts[:40], first_labels(40))
        out = err.getvalue()
        assert "Loading weights" not in out, "transformers' own bar"
        return f"{len(out.splitlines())} lines on stderr, first: {out.splitlines()[0][:80]!r}"

    width = max(len(n) for n, _, _ in RESULTS)
    for name, ok, what in RESULTS:
        print(f"{'OK   ' if ok else 'STILL'} {name:<{width}}  {what}")
    print(f"{sum(ok for _, ok, _ in RESULTS)} of {len(RESULTS)} repros show the new behaviour")
    return 0 if all(ok for _, ok, _ in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
