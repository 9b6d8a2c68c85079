"""Label conversion: every accepted format, round trips, and the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skxmc.labels import (
    LabelSet,
    LabelSpace,
    as_label_sets,
    check_label_matrix,
    encode_labels,
    encode_target,
    indices_to_labels,
)


def test_label_lists_to_csr_sorted_classes():
    Y, classes = encode_labels([["b", "a"], [], ["c", "a", "a"]])
    assert sp.isspmatrix_csr(Y) and Y.dtype == np.float32
    assert classes.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(Y.toarray(), [[1, 1, 0], [0, 0, 0], [1, 0, 1]])


@pytest.mark.parametrize(
    "container",
    [list, tuple, set, frozenset, lambda r: np.asarray(r, dtype=object)],
    ids=["list", "tuple", "set", "frozenset", "ndarray"],
)
def test_row_containers(container):
    Y, classes = encode_labels([container([1, 5]), container([5])])
    assert classes.tolist() == [1, 5]
    np.testing.assert_array_equal(Y.toarray(), [[1, 1], [0, 1]])


def test_pandas_like_and_numpy_object_sequences():
    rows = np.empty(2, dtype=object)
    rows[0], rows[1] = ["x"], ["y", "x"]
    Y, classes = encode_labels(rows)
    assert classes.tolist() == ["x", "y"]
    assert Y.nnz == 3


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float32, np.float64, bool])
def test_dense_indicator_over_255_labels_keeps_columns(dtype):
    # sklearn 1.9.1's label_binarize scrambles columns of int8/uint8 matrices with > 127/255
    # labels; we must not.
    eye = np.eye(300, dtype=dtype)
    Y, classes = encode_labels(eye)
    np.testing.assert_array_equal(classes, np.arange(300))
    np.testing.assert_array_equal(Y.indices, np.arange(300))
    assert Y.dtype == np.float32


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil"])
def test_sparse_formats(fmt):
    dense = np.array([[0, 1, 1], [0, 0, 0]], dtype=np.float64)
    Y, _classes = encode_labels(sp.csr_matrix(dense).asformat(fmt))
    np.testing.assert_array_equal(Y.toarray(), dense)
    assert Y.has_sorted_indices


def test_explicit_zeros_are_dropped():
    Y = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    out = check_label_matrix(Y)
    assert out.nnz == 1


@pytest.mark.parametrize("y", [["b", "a", "b"], np.array([2, 1, 2]), (2.0, 1.0, 2.0)])
def test_one_dimensional_targets_are_one_label_per_sample(y):
    Y, classes = encode_labels(y)
    assert len(classes) == 2
    np.testing.assert_array_equal(Y.toarray(), [[0, 1], [1, 0], [0, 1]])


def test_rows_without_labels_are_allowed():
    Y, classes = encode_labels([[], [], ["a"]])
    assert Y.shape == (3, 1)
    assert classes.tolist() == ["a"]
    assert np.diff(Y.indptr).tolist() == [0, 0, 1]
    Y, _classes = encode_labels([[], []])
    assert Y.shape == (2, 0)


def test_unknown_labels_are_ignored_and_counted():
    space = LabelSpace(np.array(["a", "b", "c"]))
    enc = space.transform([["a", "z"], ["q", "r"], ["c"]])
    np.testing.assert_array_equal(enc.Y.toarray(), [[1, 0, 0], [0, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(enc.n_unknown, [1, 2, 0])


def test_unknown_int_labels_and_type_mismatch():
    space = LabelSpace(np.array([3, 7]))
    enc = space.transform([[3, 8], [7]])
    np.testing.assert_array_equal(enc.Y.toarray(), [[1, 0], [0, 1]])
    np.testing.assert_array_equal(enc.n_unknown, [1, 0])
    enc = space.transform([["7"]])  # the str "7" is not the int label 7
    np.testing.assert_array_equal(enc.n_unknown, [1])


def test_inverse_transform_and_indices_to_labels():
    classes = np.array(["a", "b", "c"])
    space = LabelSpace(classes)
    Y = sp.csr_matrix(np.array([[1, 0, 1], [0, 0, 0]]))
    out = space.inverse_transform(Y)
    assert [r.tolist() for r in out] == [["a", "c"], []]
    labels = indices_to_labels(np.array([[2, 0], [1, -1]]), classes)
    assert labels.tolist() == [["c", "a"], ["b", None]]
    ints = indices_to_labels(np.array([[1, -1]]), np.array([10, 20]))
    assert ints.tolist() == [[20, -1]]


# --- str classes are object arrays (issue 48 item 17) -----------------------------------


def _label_bytes(classes: np.ndarray) -> int:
    """Memory of a label array: its pointers plus every Python object it holds."""
    import sys

    held = sum(sys.getsizeof(x) for x in classes.tolist()) if classes.dtype == object else 0
    return classes.nbytes + held


@pytest.mark.parametrize(
    "encode",
    [
        lambda Y: encode_labels(Y)[1],
        lambda Y: encode_target(Y)[1],
        lambda Y: encode_target(Y, classes=sorted({y for row in Y for y in row}))[1],
        lambda Y: encode_target([row[0] for row in Y])[1],  # a 1-D (multi-class) target
    ],
    ids=["encode_labels", "encode_target", "fixed-classes", "multiclass"],
)
def test_long_str_classes_are_an_object_array_that_costs_the_text(encode):
    # 300 labels of 3,000 characters: a '<U3000' array would take 300 x 3,000 x 4 = 3.6 MB,
    # 4x the text; as Python str it is the 0.9 MB of text plus a small overhead per label.
    n, length = 300, 3_000
    Y = [[f"{i:04d}".ljust(length, "x")] for i in range(n)]
    classes = encode(Y)
    assert classes.dtype == object
    assert all(type(c) is str for c in classes.tolist())
    assert classes.tolist() == sorted(row[0] for row in Y)
    assert _label_bytes(classes) < n * length + 100 * n  # 0.93 MB; '<U' would be 3.6 MB
    # Half the labels long: the size follows the text, not n_labels x the longest label.
    mixed = [[f"{i:04d}".ljust(length if i % 2 else 8, "x")] for i in range(n)]
    text = sum(len(row[0]) for row in mixed)
    assert _label_bytes(encode(mixed)) < text + 100 * n


def test_object_str_classes_look_up_sort_and_compare_like_str_arrays():
    Y, classes = encode_labels([["b", "a\x00"], ["a"], ["c"]])
    assert classes.dtype == object
    assert classes.tolist() == ["a", "a\x00", "b", "c"]  # '<U' would drop the NUL
    space = LabelSpace(classes)
    np.testing.assert_array_equal(space.columns_of(np.array(["c", "q", "a"])), [3, -1, 0])
    np.testing.assert_array_equal(space.columns_of(np.array(["b"], dtype=object)), [2])
    assert space.transform([["c", "b"], ["z"]]).n_unknown.tolist() == [0, 1]
    assert [r.tolist() for r in space.inverse_transform(Y)] == [["a\x00", "b"], ["a"], ["c"]]
    labels = space.labels_of(np.array([[3, -1]]))
    assert labels.dtype == object and labels.tolist() == [["c", None]]
    assert np.isin(classes, ["b", "c"]).tolist() == [False, False, True, True]
    assert (classes == "b").tolist() == [False, False, True, False]
    assert (
        np.searchsorted(classes, "b") == 2 and np.sort(classes[::-1]).tolist() == classes.tolist()
    )


# --- errors name the argument -------------------------------------------------------


@pytest.mark.parametrize(
    ("Y", "match"),
    [
        (np.array([[0, 2]]), "Y must be binary"),
        (np.array([[0.5, 1]]), "Y must be binary"),
        (sp.csr_matrix(np.array([[0, 3.0]])), "Y must be binary"),
        (np.array([[-1, 1]]), "Y contains negative"),
        (sp.csr_matrix(np.array([[-1.0, 0]])), "Y contains negative"),
        (np.array([[np.nan, 1]]), "Y contains NaN"),
        (sp.csr_matrix(np.array([[np.inf, 1]])), "Y contains NaN or infinite"),
        ("physics", "Y must be a sequence of label collections.*single string"),
        ([["a"], "b"], r"Y\[1\] is a bare string"),
        ([["a", ["nested"]]], "Y contains an unhashable label"),
        ([[{"a": 1}]], "Y contains an unhashable label"),
        ([[1, "a"]], "Y mixes str and int labels"),
        ([["a"], 3], r"Y\[1\] is a int, not a collection"),
        (np.array([0.5, 1.0]), "Unknown label type: continuous"),
        (np.zeros((2, 2, 2)), "Y must be a 2-D indicator matrix"),
        ([[float("nan")]], "Y contains a NaN label"),
    ],
)
def test_bad_labels_raise_naming_argument(Y, match):
    with pytest.raises(ValueError, match=match):
        encode_labels(Y)


def test_error_uses_given_argument_name():
    with pytest.raises(ValueError, match="Y_train must be binary"):
        encode_labels(np.array([[2]]), name="Y_train")


@pytest.mark.parametrize("Y", [[["a"], ["b"]], np.eye(2), sp.eye(2, format="csr")])
def test_wrong_number_of_rows(Y):
    with pytest.raises(ValueError, match="Y has 2 rows but X has 3 samples"):
        encode_labels(Y, n_samples=3)


def test_matrix_width_must_match_label_space():
    with pytest.raises(ValueError, match="Y has 2 columns but the estimator was fitted with 3"):
        LabelSpace(np.arange(3)).transform(np.eye(2))


# --- properties -------------------------------------------------------------------------

label_sets = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "dd", "e e", "ü"]), max_size=4),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(label_sets)
def test_round_trip_label_lists(rows):
    Y, classes = encode_labels(rows)
    back = LabelSpace(classes).inverse_transform(Y)
    assert [set(r.tolist()) for r in back] == [set(r) for r in rows]
    # Encoding against the fitted space gives the same matrix and no unknowns.
    enc = LabelSpace(classes).transform(rows)
    assert (enc.Y != Y).nnz == 0
    assert enc.n_unknown.sum() == 0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 20).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 1), min_size=n, max_size=n), min_size=1, max_size=15
        )
    )
)
def test_round_trip_indicator_matrix(rows):
    dense = np.array(rows, dtype=np.int32)
    Y, classes = encode_labels(dense)
    np.testing.assert_array_equal(Y.toarray(), dense)
    Y2, _ = encode_labels(sp.csr_matrix(dense))
    assert (Y != Y2).nnz == 0
    back = LabelSpace(classes).inverse_transform(Y)
    assert [r.tolist() for r in back] == [np.flatnonzero(r).tolist() for r in dense]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(-5, 5000), max_size=5), min_size=1, max_size=20))
def test_int_labels_round_trip(rows):
    # rows of sets: never mistaken for an indicator given as 0/1 lists (refused, see below)
    Y, classes = encode_labels([set(r) for r in rows])
    assert np.all(classes[:-1] < classes[1:])
    back = LabelSpace(classes).inverse_transform(Y)
    assert [set(r.tolist()) for r in back] == [set(r) for r in rows]


@pytest.mark.parametrize(
    "rows", [[[0, 1], [1, 0]], [[0, 0]], [[1, 0, 1], [0, 0, 0]], [(0, 1), (1, 1)]]
)
def test_list_of_01_rows_is_ambiguous_and_refused(rows):
    with pytest.raises(ValueError, match=r"np.asarray\(Y\).*indicator=False"):
        encode_labels(rows)
    # both explicit meanings work
    Y, classes = encode_labels(np.asarray(rows))
    assert Y.shape == (len(rows), len(rows[0]))
    Y, classes = encode_labels(as_label_sets(rows, indicator=False))
    assert set(classes.tolist()) <= {0, 1}


@pytest.mark.parametrize("rows", [[[0, 1], [2]], [[0, 1], [1, 0, 1]], [[5, 1]], [[0, 1], []]])
def test_label_lists_that_are_not_01_rows_pass(rows):
    encode_labels(rows)


def test_as_label_sets_forms_agree_and_dodge_sklearn_legacy_check():
    from sklearn.utils.multiclass import type_of_target

    lists = [["b", "a"], [], ["c"]]
    sets = as_label_sets(lists)
    assert type_of_target(sets) == "unknown"
    Y, classes = encode_labels(lists)
    np.testing.assert_array_equal(as_label_sets(Y, classes=classes), sets)
    assert as_label_sets(Y.toarray(), classes=classes).tolist() == sets.tolist()
    assert all(isinstance(r, LabelSet) for r in sets)
    with pytest.raises(ValueError, match="no order"):
        sorted(sets)
    with pytest.raises(ValueError, match="classes has 2 labels"):
        as_label_sets(Y, classes=["a", "b"])


def test_encode_target_kinds_and_fixed_classes():
    assert encode_target(["a", "b"])[2] == "multiclass"
    assert encode_target([["a"], ["b", "c"]])[2] == "multilabel-sequences"
    assert encode_target(np.eye(2, dtype=int))[2] == "multilabel-indicator"
    assert encode_target(sp.eye(2, format="csr"))[2] == "multilabel-sparse"
    Y, classes, _ = encode_target([["a"], ["b", "c"]], classes=["c", "b", "a", "z"])
    assert classes.tolist() == ["c", "b", "a", "z"]
    assert Y.toarray().tolist() == [[0, 0, 1, 0], [1, 1, 0, 0]]
    with pytest.warns(UserWarning, match="not in classes"):
        encode_target([["a"], ["q"]], classes=["a"])
    with pytest.raises(ValueError, match="duplicate"):
        encode_target([["a"]], classes=["a", "a"])
    with pytest.raises(ValueError, match="3 columns"):
        encode_target(np.eye(3, dtype=int), classes=["a", "b"])


# --- properties: any mix of row containers round-trips (issue 21) -----------------------


def _object_row(row: list) -> np.ndarray:
    out = np.empty(len(row), dtype=object)  # 1-D even for an empty row
    for i, label in enumerate(row):
        out[i] = label
    return out


_CONTAINERS = {
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "LabelSet": LabelSet,
    "object array": _object_row,
    "typed array": None,  # int64 for int labels; '<U' would drop a trailing NUL of str ones
}


def _typed_array(row: list, kind: str) -> np.ndarray:
    if kind == "int":
        return np.array(row, dtype=np.int64)
    return _object_row(row)


@st.composite
def _label_rows(draw: st.DrawFn) -> tuple[str, list, list[set]]:
    """(kind, Y as rows of various containers, the label set of each row)."""
    kind = draw(st.sampled_from(["str", "int"]))
    label = st.text(max_size=6) if kind == "str" else st.integers(-(2**63), 2**63 - 1)
    # A small pool of labels, so that rows share labels and repeat them.
    pool = draw(st.lists(label, min_size=1, max_size=8, unique=True))
    rows = draw(st.lists(st.lists(st.sampled_from(pool), max_size=5), min_size=1, max_size=12))
    names = draw(
        st.lists(st.sampled_from(list(_CONTAINERS)), min_size=len(rows), max_size=len(rows))
    )
    Y = []
    for row, name in zip(rows, names):
        make = _CONTAINERS[name]
        Y.append(_typed_array(row, kind) if make is None else make(row))
    return kind, Y, [set(r) for r in rows]


def _ambiguous(Y: list) -> bool:
    """All rows 0/1 lists or tuples of one length >= 2: refused as a possible indicator."""
    first = Y[0]
    return (
        isinstance(first, (list, tuple))
        and len(first) >= 2
        and all(
            isinstance(r, (list, tuple))
            and len(r) == len(first)
            and all(type(x) is int and x in (0, 1) for x in r)
            for r in Y
        )
    )


@settings(max_examples=150, deadline=None)
@given(_label_rows())
def test_any_label_rows_round_trip(case):
    kind, Y, expected = case
    if _ambiguous(Y):
        with pytest.raises(ValueError, match="0/1 rows"):
            encode_labels(Y)
        return
    Y_csr, classes = encode_labels(Y)
    assert Y_csr.shape == (len(Y), len(classes))
    assert classes.tolist() == sorted(set().union(*expected))
    if kind == "int" or not len(classes):  # no labels at all: an empty int64 space
        assert classes.dtype == np.int64
    else:
        assert classes.dtype == object
    space = LabelSpace(classes)
    assert [set(r.tolist()) for r in space.inverse_transform(Y_csr)] == expected
    enc = space.transform(Y)
    assert (enc.Y != Y_csr).nnz == 0 and not enc.n_unknown.any()
    sets = as_label_sets(Y)
    assert [set(r) for r in sets] == expected
    Y2, classes2 = encode_labels(sets)
    assert classes2.tolist() == classes.tolist() and (Y2 != Y_csr).nnz == 0
    assert [set(r) for r in as_label_sets(Y_csr, classes=classes)] == expected
    # A label space that misses the first label drops and counts it in every row.
    if len(classes) > 1:
        enc = LabelSpace(classes[1:]).transform(Y)
        first = classes[0].item() if hasattr(classes[0], "item") else classes[0]
        assert enc.n_unknown.tolist() == [int(first in r) for r in expected]


@settings(max_examples=60, deadline=None)
@given(_label_rows(), st.integers(1, 4))
def test_topk_fill_value_is_never_a_label(case, k):
    _, Y, _ = case
    if _ambiguous(Y):
        return
    _, classes = encode_labels(Y)
    idx = np.full((1, len(classes) + k), -1)
    idx[0, : len(classes)] = np.arange(len(classes))
    labels = indices_to_labels(idx, classes)
    fill = labels[0, len(classes) :].tolist()
    assert all(f not in set(classes.tolist()) for f in fill)
    assert labels[0, : len(classes)].tolist() == classes.tolist()
