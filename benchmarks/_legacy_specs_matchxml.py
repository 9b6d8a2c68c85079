"""The tables of the MatchXML page (``docs/benchmarks/matchxml.rst``), from the results
files of ``benchmarks/matchxml.py``, ``matchxml_dev.py`` and ``matchxml_final_features.py``
before the harness (:mod:`benchmarks._legacy_tables` renders them).
"""

from __future__ import annotations

from collections.abc import Iterable

from benchmarks._legacy_tables import Col, Row, Runs, Table, runs

PAGE = "matchxml.rst"


def _row(label: str, *selected: Runs, also: Iterable[Runs] = ()) -> Row:
    return Row(label, tuple(selected), tuple(also))


def _table_xii(file: str) -> tuple[Row, ...]:
    """The paper's Table XII rows 1-4 of a ``benchmarks/matchxml.py`` ablation run."""
    rows = ("xii-1", "xii-2", "xii-3", "matchxml")
    return tuple(_row(label, runs(file, row=row)) for label, row in zip(XII_ROWS, rows))


def _baselines_and_defaults(file: str) -> tuple[Row, ...]:
    """The rows of a ``benchmarks/matchxml.py`` run: both XR-Linear baselines, MatchXML."""
    return (
        _row(BASE, runs(file, row="tfidf")),
        _row(SENT, runs(file, row="tfidf+sentence")),
        _row("MatchXML, defaults", runs(file, row="matchxml")),
    )


def _cols(*metrics: str) -> tuple[Col, ...]:
    return tuple(Col(m) for m in metrics)


SIX = _cols("P@1", "P@3", "P@5", "nDCG@5", "PSP@1", "PSP@5")
TEST_SEEDS = _cols("seeds", "P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")
XII = _cols("seeds", "P@1", "P@3", "P@5", "PSP@1", "PSP@5")

BASE = "TF-IDF + XR-Linear (tfn+man, Cp 2)"
SENT = "[TF-IDF | static sentence] + XR-Linear (tfn+man, Cp 2)"
XII_1 = "1: PIFA tree, hinge, no sentence embeddings"
XII_2 = "2: + label2vec tree"
XII_3 = "3: + text-label matching loss"
XII_4 = "4: + static sentence embeddings (the defaults)"
XII_ROWS = (XII_1, XII_2, XII_3, XII_4)
PIFA0 = "``0:pifa``: [TF-IDF | static sentence] baseline"
HALF = "``0.5:refined``: fine-tuned block at half weight"
PIFA1 = "``1:pifa``: PIFA tree on MatchXML's features"

DEV_A, DEV_B = "matchxml_dev_a", "matchxml_dev_b"
MX = "matchxml mean:linear"
S150 = "matchxml_final_features_dev_s150"
T150 = "matchxml_final_features_dev_s150_thr0001"
T150_S1 = "matchxml_final_features_dev_s150_seed1_thr0001"
T150_W025 = "matchxml_final_features_dev_s150_w025_thr0001"
OFFICIAL = "matchxml_final_features_officialdev"
TEST_THR = "matchxml_final_features_test_thr0001"
XII_THR = "matchxml_tibkat_table12_thr0001"

TABLES: tuple[Table, ...] = (
    Table(
        "matchxml_dev_a-dev",
        "Settings chosen on a dev split, 3,000 train / 1,000 dev texts, ranker threshold 0.1",
        "row (dev)",
        SIX,
        (
            _row(BASE, runs(DEV_A, config="tfidf")),
            _row(SENT, runs(DEV_A, config="tfidf+sentence")),
            _row(
                "MatchXML, defaults (mean, linear bootstrap; tfn+man, Cp 2, beam 10)",
                runs(DEV_A, config=MX, ranker="tfn+man:2:10:refined"),
            ),
            _row(
                "ranker tfn, Cp 1 (the previous default)",
                runs(DEV_A, config=MX, ranker="tfn:1:10:refined"),
            ),
            _row("ranker tfn+man, Cp 1", runs(DEV_A, config=MX, ranker="tfn+man:1:10:refined")),
            _row("ranker tfn, Cp 2", runs(DEV_A, config=MX, ranker="tfn:2:10:refined")),
            _row(
                "refined tree 8 / 16 (the reference's Eurlex shape)",
                runs(DEV_A, config=MX, ranker="tfn+man:2:10:refined8x16"),
            ),
            _row('CLS pooling (``pooling="cls"``)', runs(DEV_B, config="matchxml cls:linear")),
            _row(
                'centroid bootstrap (``label_bootstrap="centroid"``)',
                runs(DEV_B, config="matchxml mean:centroid"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_reduced-test",
        "4,000 train / 1,000 test texts, ranker threshold 0.1 (test)",
        "row (test, 3 seeds)",
        SIX,
        _baselines_and_defaults("matchxml_tibkat_reduced"),
    ),
    Table(
        "matchxml_tibkat_reduced_dev-dev",
        "3,000 train / 1,000 dev texts, ranker threshold 0.1 (dev)",
        "row (dev, 3 seeds)",
        SIX,
        _baselines_and_defaults("matchxml_tibkat_reduced_dev"),
    ),
    Table(
        "matchxml_tibkat_table12_reduced-test",
        "Table XII at the reduced budget (test)",
        "row (test, 3 seeds)",
        SIX,
        (*_table_xii("matchxml_tibkat_table12_reduced"),),
    ),
    Table(
        "matchxml_tibkat_table12_reduced_dev-dev",
        "Table XII rows 3 and 4 at the reduced budget (dev)",
        "row (dev, 3 seeds)",
        SIX,
        (
            _row(
                "3: without static sentence embeddings",
                runs("matchxml_tibkat_table12_reduced_dev", row="xii-3"),
            ),
            _row("4: the defaults", runs("matchxml_tibkat_table12_reduced_dev", row="matchxml")),
        ),
    ),
    Table(
        "matchxml_tibkat_defaults-test",
        "Full size, ranker threshold 0.1 (test)",
        "row (test)",
        TEST_SEEDS,
        _baselines_and_defaults("matchxml_tibkat_defaults"),
    ),
    Table(
        "matchxml_final_features_dev_s150-dev",
        "Dev split at full size, ranker threshold 0.1, one fine-tuning per budget (dev)",
        "variant (dev)",
        SIX,
        (
            _row(
                "``1:refined``: MatchXML, defaults (150 steps per stage)",
                runs(S150, variant="1:refined"),
            ),
            _row(PIFA0, runs(S150, variant="0:pifa")),
            _row(
                "``1:refined:nosent``: no static sentence block (Table XII row 3's features)",
                runs(S150, variant="1:refined:nosent"),
            ),
            _row(HALF, runs(S150, variant="0.5:refined")),
            _row(PIFA1, runs(S150, variant="1:pifa")),
            _row(
                "defaults with 300 steps per stage",
                runs("matchxml_final_features_dev_s300", variant="1:refined"),
            ),
            _row(
                "defaults fine-tuned down to the labels (``max_matcher_size=None``)",
                runs("matchxml_final_features_dev_all_layers", variant="1:refined"),
            ),
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_static256-dev",
        "Dev split at full size, static block at 256 tokens (dev)",
        "variant (dev), static block at 256 tokens",
        SIX,
        (
            _row(
                "``1:refined``: MatchXML",
                runs("matchxml_final_features_dev_s150_static256", variant="1:refined"),
            ),
            _row(PIFA0, runs("matchxml_final_features_dev_s150_static256", variant="0:pifa")),
            _row(HALF, runs("matchxml_final_features_dev_s150_static256", variant="0.5:refined")),
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_thr0001-dev",
        "Dev split at full size, ranker threshold 0.001, in brackets at 0.1 (dev)",
        "variant (dev), threshold 0.001",
        (
            Col("P@1", bracket=True),
            Col("P@3"),
            Col("P@5", bracket=True),
            Col("nDCG@5"),
            Col("PSP@1"),
            Col("PSP@5", bracket=True),
        ),
        tuple(
            _row(label, runs(T150, variant=v), also=[runs(S150, variant=v)])
            for label, v in (
                (PIFA0, "0:pifa"),
                ("``1:refined``: MatchXML, defaults", "1:refined"),
                ("``1:refined:nosent``: no static sentence block", "1:refined:nosent"),
                (HALF, "0.5:refined"),
                (PIFA1, "1:pifa"),
            )
        ),
    ),
    Table(
        "matchxml_final_features_dev_s150_seed1_thr0001-dev",
        "Dev split at full size, two fine-tunings, ranker threshold 0.001 (dev)",
        "variant (dev)",
        (
            Col("P@1", " seed 0", seeds=(0,)),
            Col("P@1", " seed 1", seeds=(1,)),
            Col("P@1", ", 2 seeds"),
            Col("P@5", ", 2 seeds"),
            Col("PSP@1", ", 2 seeds"),
        ),
        tuple(
            _row(label, runs(seed0, variant=v), runs(T150_S1, variant=v))
            for label, v, seed0 in (
                (PIFA0, "0:pifa", T150),
                ("``1:refined``: MatchXML, defaults", "1:refined", T150),
                ("``0.5:refined``", "0.5:refined", T150),
                ("``0.25:refined``", "0.25:refined", T150_W025),
            )
        ),
    ),
    Table(
        "matchxml_final_features_officialdev-dev",
        "The data set's own dev split, ranker threshold 0.001 (official dev)",
        "variant (official dev)",
        SIX,
        (
            _row(PIFA0, runs(OFFICIAL, variant="0:pifa")),
            _row("MatchXML, defaults (as fitted)", runs(OFFICIAL, variant="MatchXML as fitted")),
            _row("``0.25:refined`` (seed 0 only)", runs(OFFICIAL, variant="0.25:refined")),
            _row("``0.5:refined``", runs(OFFICIAL, variant="0.5:refined")),
        ),
    ),
    Table(
        "matchxml_tibkat_table12_thr0001-test",
        "Table XII at full size, ranker threshold 0.001 (test)",
        "row (test), threshold 0.001",
        XII,
        (
            _row(XII_1, runs(XII_THR, row="xii-1")),
            _row(XII_2, runs(XII_THR, row="xii-2")),
            _row(XII_3, runs(TEST_THR, variant="1:refined:nosent")),
            _row(XII_4, runs(TEST_THR, variant="MatchXML as fitted")),
            _row(
                "[TF-IDF | static sentence] + XR-Linear (baseline)",
                runs(XII_THR, row="tfidf+sentence"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_table12-test",
        "Table XII at full size, ranker threshold 0.1 (test)",
        "row (test), threshold 0.1",
        XII,
        (
            *_table_xii("matchxml_tibkat_table12"),
            _row(
                "[TF-IDF | static sentence] + XR-Linear (baseline)",
                runs("matchxml_tibkat_table12", row="tfidf+sentence"),
            ),
        ),
    ),
    Table(
        "matchxml_tibkat_gpu_parts-test",
        "GPU profile, the paper's fine-tuning budget (test)",
        "row (test)",
        TEST_SEEDS,
        (
            _row(
                "MatchXML (defaults: refined tree, fine-tuned block at weight 1)",
                runs("matchxml_tibkat_gpu_parts", variant="1:refined"),
            ),
            _row(
                "[TF-IDF | sentence] + XR-Linear",
                runs("matchxml_tibkat_gpu_parts", variant="0:pifa"),
            ),
            _row("TF-IDF + XR-Linear", runs("matchxml_tibkat_gpu_parts", variant="0:pifa:nosent")),
        ),
    ),
)
