"""libpecos ``XLinearModel`` folders in and out: :func:`from_pecos` and :func:`to_pecos`.

libpecos (``XLinearModel.save``) writes a model as::

    model_dir/param.json                 {"__meta__": {"class_fullname": "...###XLinearModel"}}
    model_dir/ranker/param.json          HierarchicalMLModel: depth, nr_features, nr_labels
    model_dir/ranker/{d}.model/param.json  MLModel of layer d: bias, pred_kwargs
                                         ({"only_topk": ..., "post_processor": ...})
    model_dir/ranker/{d}.model/W.npz     weights, (nr_features [+ 1 bias row], K_d)
    model_dir/ranker/{d}.model/C.npz     cluster matrix, (K_d, K_{d-1}); (K_1, 1) at d = 0

``W`` and ``C`` are scipy ``.npz`` files (``save_npz(compressed=False)``, CSC). The layers
are XR-Linear's: ``C`` is :attr:`HierarchicalLabelTree.cluster_chain_`'s matrix of the
same layer and ``W`` the layer's weights, bias row last (PECOS appends the bias feature to
every query when ``bias > 0``). The beam search is the same as well: the ``only_topk`` of
every layer but the last is its beam, the last layer's is the top-k, and PECOS's
post-processors ``l3-hinge``, ``sigmoid`` and ``noop`` are skxmc's.

Both directions use numpy and scipy only (libpecos is not a dependency); the files are read
with ``allow_pickle=False`` and every structure the beam search indexes is checked before
an estimator is built. The estimator classes are found by name (this package imports no
estimator).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._directory import follow_umask, move_into_place, new_sibling_dir, real_target
from ._format import CONFIG_NAME, read_json
from ._registry import registered_class

__all__ = [
    "PECOS_POST_PROCESSORS",
    "describe_pecos",
    "from_pecos",
    "is_pecos_dir",
    "read_pecos",
    "to_pecos",
]

# The post-processors that skxmc's beam search implements (skxmc.linear._beam's
# POST_PROCESSORS; a test keeps the two equal). PECOS has more (l1/l2/l4-hinge and the log-
# forms that add instead of multiplying): a folder that stores one is refused.
PECOS_POST_PROCESSORS = ("l3-hinge", "sigmoid", "noop")
# What PECOS's PostProcessor.get makes of the values older versions stored.
_LEGACY_POST = {True: "l3-hinge", False: "noop", None: "noop"}

_XLINEAR = "pecos.xmc.xlinear.model###XLinearModel"
_HIERARCHICAL = "pecos.xmc.base###HierarchicalMLModel"
_MLMODEL = "pecos.xmc.base###MLModel"
_PRED_PARAMS = "pecos.xmc.base###MLModel.PredParams"
_PARAM = "param.json"
_RANKER = "ranker"


@dataclass
class _Folder:
    """A parsed PECOS folder: its prediction settings per layer, and (unless only the
    ``param.json`` files were read) per layer the weights (CSC float32, bias row last)
    and the cluster matrix (CSR float32, one 1 per row)."""

    path: Path
    n_features: int
    layer_sizes: list[int]
    bias: float
    only_topk: list[int]
    post_processors: list[Any]
    layer_params: list[Path]  # each layer's param.json, for the messages
    weights: list[sp.csc_matrix] = field(default_factory=list)
    chain: list[sp.csr_matrix] = field(default_factory=list)

    @property
    def n_labels(self) -> int:
        return self.layer_sizes[-1]


def _error(path: Path, expected: str) -> ValueError:
    return ValueError(f"{path}: {expected}.")


def _param(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: a libpecos XLinearModel folder (XLinearModel.save) has a "
            f"param.json at its top, in ranker/ and in every ranker/<layer>.model/."
        )
    return read_json(path)


def _int_field(param: dict, key: str, path: Path, minimum: int) -> int:
    value = param.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise _error(path, f"{key!r} is {value!r}; expected an int of at least {minimum}")
    return value


def _load_matrix(path: Path) -> sp.csc_matrix:
    """A matrix saved by PECOS's ``smat_util.save_matrix`` (a scipy ``.npz``, or a dense
    ``.npy`` under the same name), as canonical CSC float32; no pickle, every index
    checked."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing (every layer of a PECOS folder has W.npz and C.npz)."
        )
    with open(path, "rb") as f:
        magic = f.read(6)
    # a zip archive (.npz) or a .npy header; np.load would read anything else as a pickle
    if magic[:4] != b"PK\x03\x04" and magic != b"\x93NUMPY":
        raise _error(path, "not a numpy .npz or .npy file (no zip archive, no .npy header)")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise _error(path, f"not a numpy .npz file ({exc})") from exc
    try:
        if isinstance(loaded, np.ndarray):
            if loaded.ndim != 2:
                raise ValueError(f"a dense array of shape {loaded.shape}; expected 2-D")
            M = sp.csc_matrix(loaded)
        else:
            with loaded:
                M = _sparse_from_npz(loaded)
    except (KeyError, ValueError, TypeError, IndexError, zipfile.BadZipFile, OSError) as exc:
        raise _error(path, f"not a matrix this reader accepts ({exc})") from exc
    if M.dtype.kind not in "fiu":
        raise _error(path, f"holds {M.dtype} values; expected floats")
    M = sp.csc_matrix(M, dtype=np.float32)
    if not np.all(np.isfinite(M.data)):
        raise _error(path, "holds NaN or infinite values")
    M.sum_duplicates()  # also sorts the indices
    return M


def _sparse_from_npz(npz: Any) -> sp.spmatrix:
    """The matrix of a ``scipy.sparse.save_npz`` file, its indices checked (a bad file
    raises ``ValueError``, ``KeyError`` or ``TypeError``)."""
    fmt = npz["format"].item()
    if isinstance(fmt, bytes):  # files of scipy < 1.0
        fmt = fmt.decode("ascii")
    shape = tuple(int(n) for n in npz["shape"])
    if len(shape) != 2 or min(shape) < 0:
        raise ValueError(f"shape {shape}; expected two non-negative sizes")
    if fmt == "coo":  # the constructor checks the indices against the shape
        return sp.coo_matrix((npz["data"], (npz["row"], npz["col"])), shape=shape)
    if fmt not in ("csc", "csr"):
        raise ValueError(f"a {fmt!r} sparse matrix; expected csc, csr or coo")
    cls = sp.csc_matrix if fmt == "csc" else sp.csr_matrix
    M = cls((npz["data"], npz["indices"], npz["indptr"]), shape=shape)
    M.check_format(full_check=True)  # index bounds and indptr order
    return M


def _post_processor(value: Any, path: Path) -> str:
    if isinstance(value, bool) or value is None:
        return _LEGACY_POST[value]
    if value not in PECOS_POST_PROCESSORS:
        raise ValueError(
            f"{path}: post_processor {value!r} is not supported by skxmc (supported: "
            f"{', '.join(PECOS_POST_PROCESSORS)}); pass post_processor= to from_pecos to "
            f"read the model with one of them instead."
        )
    return value


def _ranker_dir(model_dir: Path) -> Path:
    """The folder of the HierarchicalMLModel: ``model_dir/ranker`` of an XLinearModel
    folder, or ``model_dir`` itself when it is the ranker folder."""
    if (model_dir / CONFIG_NAME).is_file():
        raise ValueError(
            f"{model_dir} is an skxmc model directory ({CONFIG_NAME}), not a libpecos "
            f"folder: open it with skxmc.load."
        )
    top = _param(model_dir / _PARAM)
    meta = top.get("__meta__")
    name = meta.get("class_fullname") if isinstance(meta, dict) else None
    if top.get("model") == "HierarchicalMLModel" or name == _HIERARCHICAL:
        return model_dir
    if name != _XLINEAR:
        raise _error(
            model_dir / _PARAM,
            f"class {name!r}; expected {_XLINEAR!r} (XLinearModel.save) or a "
            f"HierarchicalMLModel (its ranker/ folder). Other PECOS models (XTransformer, "
            f"HNSW) are not read",
        )
    return model_dir / _RANKER


def is_pecos_dir(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` looks like a libpecos XLinearModel (or HierarchicalMLModel)
    folder: a ``param.json`` naming one, and no ``skxmc-model.json``."""
    path = Path(directory)
    try:
        _ranker_dir(path)
    except (OSError, ValueError):
        return False
    return True


def read_pecos(model_dir: str | os.PathLike, *, weights: bool = True) -> _Folder:
    """Parse and check a libpecos folder; with ``weights=False`` only its ``param.json``
    files (what ``skxmc info`` shows)."""
    root = Path(model_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"no libpecos model folder at {str(root)!r}.")
    ranker = _ranker_dir(root)
    rparam_path = ranker / _PARAM
    rparam = _param(rparam_path)
    if rparam.get("model") != "HierarchicalMLModel":
        raise _error(rparam_path, f"model {rparam.get('model')!r}; expected 'HierarchicalMLModel'")
    if rparam.get("is_mmap"):
        raise ValueError(
            f"{rparam_path}: a memory-mapped model (HierarchicalMLModel.compile_mmap_model) "
            f"is not read; pass the .npz folder that XLinearModel.save wrote."
        )
    depth = _int_field(rparam, "depth", rparam_path, 1)
    n_features = _int_field(rparam, "nr_features", rparam_path, 1)
    layers = []
    for d in range(depth):
        folder = ranker / f"{d}.model"
        path = folder / _PARAM
        param = _param(path)
        if param.get("model") != "MLModel":
            raise _error(path, f"model {param.get('model')!r}; expected 'MLModel'")
        if param.get("is_mmap"):
            raise ValueError(f"{path}: a memory-mapped layer is not read; pass the .npz folder.")
        bias = param.get("bias")
        if not isinstance(bias, (int, float)) or isinstance(bias, bool) or not np.isfinite(bias):
            raise _error(path, f"'bias' is {bias!r}; expected a number")
        pred = param.get("pred_kwargs")
        if not isinstance(pred, dict):
            raise _error(path, "no 'pred_kwargs' object (only_topk, post_processor)")
        topk = pred.get("only_topk")
        if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
            raise _error(path, f"pred_kwargs.only_topk is {topk!r}; expected an int >= 1")
        layers.append(
            {
                "path": path,
                "bias": float(bias),
                "only_topk": topk,
                "post_processor": pred.get("post_processor", "l3-hinge"),
                "n_nodes": _int_field(param, "nr_labels", path, 1),
            }
        )
    biases = {lay["bias"] for lay in layers}
    if len(biases) != 1:
        raise _error(ranker, f"layers with different biases {sorted(biases)}; skxmc has one")
    bias = biases.pop()
    if _int_field(rparam, "nr_labels", rparam_path, 1) != layers[-1]["n_nodes"]:
        raise _error(rparam_path, "nr_labels differs from the last layer's nr_labels")
    out = _Folder(
        path=root,
        n_features=n_features,
        layer_sizes=[lay["n_nodes"] for lay in layers],
        bias=bias,
        only_topk=[lay["only_topk"] for lay in layers],
        post_processors=[lay["post_processor"] for lay in layers],
        layer_params=[lay["path"] for lay in layers],
    )
    if not weights:
        return out
    n_parents = 1
    bias_rows = 1 if bias > 0 else 0
    for d, lay in enumerate(layers):
        folder = lay["path"].parent
        C = _load_matrix(folder / "C.npz")
        W = _load_matrix(folder / "W.npz")
        if C.shape != (lay["n_nodes"], n_parents):
            raise _error(
                folder / "C.npz",
                f"shape {C.shape}; expected (nodes of layer {d}, "
                f"{'the root' if d == 0 else f'nodes of layer {d - 1}'}) = "
                f"{(lay['n_nodes'], n_parents)}",
            )
        C = C.tocsr()
        if np.any(np.diff(C.indptr) != 1) or np.any(C.data == 0):
            raise _error(
                folder / "C.npz", "a node without exactly one parent; expected one non-zero per row"
            )
        C.data[:] = 1.0
        expected = (n_features + bias_rows, lay["n_nodes"])
        if W.shape != expected:
            raise _error(
                folder / "W.npz",
                f"shape {W.shape}; expected (nr_features{' + 1 bias row' * bias_rows}, "
                f"nodes of layer {d}) = {expected}",
            )
        if not bias_rows:  # skxmc keeps a bias row; with bias 0 it adds nothing
            W = sp.csc_matrix(sp.vstack([W, sp.csr_matrix((1, W.shape[1]), dtype=np.float32)]))
        out.weights.append(W)
        out.chain.append(C)
        n_parents = lay["n_nodes"]
    return out


def _prediction_settings(
    folder: _Folder, beam_size: int | None, top_k: int | None, post_processor: str | None
) -> dict:
    """beam_size / top_k / post_processor of the estimator: the folder's, unless given."""
    for name, value in (("beam_size", beam_size), ("top_k", top_k)):
        if value is not None and (
            not isinstance(value, Integral) or isinstance(value, bool) or value < 1
        ):
            raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}.")
    if post_processor is None:
        posts = {
            _post_processor(p, path) for p, path in zip(folder.post_processors, folder.layer_params)
        }
        if len(posts) != 1:
            raise _error(
                folder.path,
                f"layers with different post-processors {sorted(posts)}; skxmc uses one for "
                f"every layer (pass post_processor=)",
            )
        post_processor = posts.pop()
    elif post_processor not in PECOS_POST_PROCESSORS:
        raise ValueError(
            f"post_processor must be one of {PECOS_POST_PROCESSORS}, got {post_processor!r}."
        )
    if beam_size is None:
        beams = set(folder.only_topk[:-1])
        if len(beams) > 1:
            raise _error(
                folder.path,
                f"inner layers with different beams (only_topk {folder.only_topk[:-1]}); skxmc "
                f"keeps one beam_size at every inner layer (pass beam_size=)",
            )
        beam_size = beams.pop() if beams else 10
    return {
        "beam_size": beam_size,
        "top_k": folder.only_topk[-1] if top_k is None else top_k,
        "post_processor": post_processor,
    }


def from_pecos(
    model_dir: str | os.PathLike,
    *,
    classes: Any = None,
    beam_size: int | None = None,
    top_k: int | None = None,
    post_processor: str | None = None,
) -> Any:
    """Read a libpecos ``XLinearModel`` folder into a fitted XRLinearClassifier.

    The folder is parsed with numpy and scipy (libpecos is not needed) and checked: a
    missing file, a matrix of the wrong shape or a setting skxmc does not implement raises
    an error that names the file. The estimator predicts what libpecos's
    ``XLinearModel.load(model_dir).predict(X)`` predicts, the same labels in the same
    order with the same scores (float32 rounding aside), at the same beam size, top-k and
    post-processor.

    Parameters
    ----------
    model_dir : str or path-like
        The folder ``XLinearModel.save`` wrote (or its ``ranker`` folder).
    classes : array-like of shape (n_labels,), default=None
        Label identifiers of the label columns (PECOS stores none); None:
        ``0, ..., n_labels - 1``.
    beam_size, top_k : int, default=None
        As the estimator's parameters; None: the folder's (the ``only_topk`` of its inner
        layers and of its last layer), as PECOS's ``predict`` without overrides.
    post_processor : {"l3-hinge", "sigmoid", "noop"}, default=None
        None: the folder's (the same in every layer).

    Returns
    -------
    XRLinearClassifier
        Fitted: ``classes_``, ``tree_`` (a :class:`~skxmc.HierarchicalLabelTree` holding
        the folder's cluster chain), ``weights_``, ``n_features_in_``. Its training
        parameters are skxmc's defaults (the folder does not store PECOS's).

    Raises
    ------
    FileNotFoundError
        When a file of the folder is missing.
    ValueError
        When a file is damaged, a matrix has the wrong shape, or the folder is not an
        XLinearModel or uses a post-processor skxmc lacks (``l1-hinge``,
        ``log-sigmoid``, ...) or one per layer, or a memory-mapped layout.

    Examples
    --------
    A model fitted by skxmc, written as a libpecos folder and read back (a folder that
    libpecos's ``XLinearModel.save`` wrote reads the same way):

    >>> import tempfile
    >>> from skxmc import HierarchicalLabelTree, XRLinearClassifier
    >>> from skxmc.datasets import make_xmc_classification
    >>> from skxmc.io import from_pecos, to_pecos
    >>> X, Y = make_xmc_classification(200, 300, 40, random_state=0)
    >>> tree = HierarchicalLabelTree(branching_factor=4, max_leaf_size=4)
    >>> clf = XRLinearClassifier(tree=tree, beam_size=3, top_k=5).fit(X, Y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     imported = from_pecos(to_pecos(clf, f"{tmp}/pecos_model"))
    >>> [W.shape[1] for W in imported.weights_], imported.beam_size, imported.top_k
    ([4, 16, 40], 3, 5)
    >>> bool((imported.predict_topk(X[:5])[0] == clf.predict_topk(X[:5])[0]).all())
    True
    """
    folder = read_pecos(model_dir)
    settings = _prediction_settings(folder, beam_size, top_k, post_processor)
    classes_ = _label_ids(classes, folder.n_labels)
    tree_cls = registered_class("HierarchicalLabelTree")
    clf_cls = registered_class("XRLinearClassifier")
    tree = tree_cls()
    chain = folder.chain
    tree.__dict__.update(
        classes_=classes_,
        n_labels_=folder.n_labels,
        n_layers_=len(chain),
        # binary splitting levels: those of a balanced binary tree with as many leaves
        depth_=int(np.ceil(np.log2(chain[-1].shape[1]))) if len(chain) > 1 else 0,
        cluster_chain_=chain,
        leaf_assignment_=chain[-1].indices.astype(np.int64),
        label_embedder_=None,
    )
    clf = clf_cls(
        bias=max(folder.bias, 0.0),
        classes=None if classes is None else classes_,
        **settings,
    )
    # __setstate__ checks that the parts form one model and builds the search structures.
    clf.__setstate__(
        {
            "n_features_in_": folder.n_features,
            "classes_": classes_,
            "target_type_": "multilabel-sparse",
            "tree_": tree,
            "weights_": folder.weights,
            "fit_time_per_layer_": [0.0] * len(chain),
            "fit_bytes_per_layer_": None,
        }
    )
    return clf


def _label_ids(classes: Any, n_labels: int) -> np.ndarray:
    """``from_pecos``'s ``classes``, checked: one unique identifier per label column
    (PECOS stores none), or ``0, ..., n_labels - 1`` for None."""
    if classes is None:
        return np.arange(n_labels)
    ids = np.asarray(classes)
    if ids.dtype.kind == "U":  # str labels: an object array, as every classes_ is
        ids = ids.astype(object)
    if ids.ndim != 1 or len(ids) != n_labels:
        raise ValueError(
            f"classes must be 1-D with one identifier per label ({n_labels}), "
            f"got shape {ids.shape}."
        )
    if len(np.unique(ids)) != len(ids):
        raise ValueError("classes holds duplicate labels.")
    return ids


def _meta(name: str, fields: dict) -> dict:
    return {"__meta__": {"class_fullname": name}, **fields}


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=True), encoding="utf-8")


def to_pecos(est: Any, model_dir: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a fitted XRLinearClassifier as a libpecos ``XLinearModel`` folder.

    ``XLinearModel.load(model_dir)`` reads it and predicts what ``est`` predicts with
    ``beam_size=est.beam_size``, ``only_topk=est.top_k`` and
    ``post_processor=est.post_processor`` (stored as the folder's prediction settings).
    The label identifiers are not written (PECOS has none: column ``j`` is
    ``est.classes_[j]``), nor is any vectorizer: pass the ranker of a pipeline, and
    give PECOS the same features.

    Parameters
    ----------
    est : XRLinearClassifier
        A fitted estimator.
    model_dir : str or path-like
        Target folder; created (written next to it and moved in, so an interrupted
        write leaves no partial folder).
    overwrite : bool, default=False
        Replace a libpecos folder already at ``model_dir``.

    Returns
    -------
    Path
        ``model_dir``.

    Raises
    ------
    TypeError
        When ``est`` is not an XRLinearClassifier (a pipeline included).
    FileExistsError
        When ``model_dir`` exists and is not a libpecos folder to overwrite.

    Examples
    --------
    >>> import tempfile
    >>> from skxmc import XRLinearClassifier
    >>> from skxmc.datasets import make_xmc_classification
    >>> from skxmc.io import from_pecos, to_pecos
    >>> X, Y = make_xmc_classification(200, 300, 40, random_state=0)
    >>> clf = XRLinearClassifier().fit(X, Y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = to_pecos(clf, f"{tmp}/pecos_model")
    ...     sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    ['param.json', 'ranker/0.model/C.npz', 'ranker/0.model/W.npz',
     'ranker/0.model/param.json', 'ranker/param.json']
    """
    clf_cls = registered_class("XRLinearClassifier")
    if not isinstance(est, clf_cls):
        hint = " (pass its last step)" if hasattr(est, "steps") else ""
        raise TypeError(f"est must be a fitted XRLinearClassifier{hint}, got {type(est).__name__}.")
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est)
    if getattr(est, "predict_only_", False):
        raise ValueError(
            "est is predict-only (XRLinearClassifier.compact() or skxmc.save(..., "
            "predict_only=True) dropped its weights_, which a libpecos folder stores); "
            "write the full model, or fit it again."
        )
    est._check_complete()
    target = Path(model_dir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        if not overwrite or not is_pecos_dir(target):
            raise FileExistsError(
                f"{target} exists and is not empty; pass overwrite=True to replace a libpecos "
                f"folder there (any other content is never replaced)."
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    real = real_target(target)
    tmp = new_sibling_dir(real)
    try:
        _write_pecos(est, tmp)
        follow_umask(tmp)
        move_into_place(tmp, real)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_pecos(est: Any, root: Path) -> None:
    chain = est.tree_.cluster_chain_
    depth = len(chain)
    n_features = int(est.n_features_in_)
    bias = float(est.bias)
    _write_json(root / _PARAM, _meta(_XLINEAR, {}))
    ranker = root / _RANKER
    ranker.mkdir()
    _write_json(
        ranker / _PARAM,
        _meta(
            _HIERARCHICAL,
            {
                "model": "HierarchicalMLModel",
                "depth": depth,
                "nr_features": n_features,
                "nr_codes": int(chain[-1].shape[1]),
                "nr_labels": int(chain[-1].shape[0]),
            },
        ),
    )
    for d, (W, C) in enumerate(zip(est.weights_, chain)):
        folder = ranker / f"{d}.model"
        folder.mkdir()
        # PECOS appends the bias feature only when bias > 0 (and then expects its row)
        W = sp.csc_matrix(W, dtype=np.float32)
        if bias <= 0:
            W = sp.csc_matrix(W[:-1])
        W.sort_indices()
        C = sp.csc_matrix(C, dtype=np.float32)
        C.sort_indices()
        topk = int(est.top_k) if d == depth - 1 else int(est.beam_size)
        _write_json(
            folder / _PARAM,
            _meta(
                _MLMODEL,
                {
                    "model": "MLModel",
                    "nr_labels": int(C.shape[0]),
                    "nr_features": n_features,
                    "nr_codes": int(C.shape[1]),
                    "bias": bias if bias > 0 else -1.0,
                    "pred_kwargs": _meta(
                        _PRED_PARAMS,
                        {"only_topk": topk, "post_processor": est.post_processor},
                    ),
                },
            ),
        )
        sp.save_npz(folder / "W.npz", W, compressed=False)
        sp.save_npz(folder / "C.npz", C, compressed=False)


def describe_pecos(directory: str | os.PathLike) -> dict[str, Any]:
    """:func:`~skxmc.io.describe`'s dict for a libpecos folder, from its ``param.json``
    files (no weights read); ``pecos`` adds the layer sizes and prediction settings."""
    folder = read_pecos(directory, weights=False)
    root = Path(directory)
    files = {
        p.relative_to(root).as_posix(): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    try:
        settings = _prediction_settings(folder, None, None, None)
    except ValueError as exc:  # shown, not raised: from_pecos says the same
        settings = {"unsupported": str(exc)}
    return {
        "path": str(root),
        "estimator": "libpecos XLinearModel (skxmc.io.from_pecos reads it as XRLinearClassifier)",
        "steps": [
            {
                "name": None,
                "class": "XRLinearClassifier",
                "params": {"bias": folder.bias, **settings},
            }
        ],
        "task": "multi-label",
        "n_labels": folder.n_labels,
        "n_features": folder.n_features,
        "features": "input features",
        "predict_only": False,
        "skxmc_version": None,
        "format_version": None,
        "files": files,
        "total_size": sum(files.values()),
        "model_card": False,
        "pecos": {
            "layers": folder.layer_sizes,
            "bias": folder.bias,
            "only_topk": folder.only_topk,
            "post_processors": [str(p) for p in folder.post_processors],
        },
    }
