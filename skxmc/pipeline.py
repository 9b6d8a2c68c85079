"""A scikit-learn :class:`~sklearn.pipeline.Pipeline` that also exposes ``predict_topk``
and ``explain``.

skxmc's rankers return their top-k labels with ``predict_topk(X, k)``, a method
scikit-learn's ``Pipeline`` does not know about. :class:`Pipeline` and :func:`make_pipeline`
are drop-in replacements that add it (present only when the final step has it), so that
``pipe.predict_topk(texts)`` and ``search.best_estimator_.predict_topk(texts)`` work on raw
input. Everything else is scikit-learn's ``Pipeline``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline as _SklearnPipeline
from sklearn.pipeline import make_pipeline as _sklearn_make_pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

__all__ = ["Pipeline", "make_pipeline"]


def _final_estimator_has(attr: str):
    """``available_if`` check: the final step has ``attr`` (its AttributeError otherwise)."""

    def check(self: Pipeline) -> bool:
        getattr(self._final_estimator, attr)
        return True

    return check


class Pipeline(_SklearnPipeline):
    """scikit-learn's :class:`~sklearn.pipeline.Pipeline` plus ``predict_topk``.

    Parameters, attributes and every other method are those of
    :class:`sklearn.pipeline.Pipeline`; :func:`skxmc.load` returns saved pipelines as this
    class.

    Parameters
    ----------
    steps : list of tuples
        ``(name, estimator)`` pairs, as for :class:`sklearn.pipeline.Pipeline`.
    transform_input : list of str, default=None
        As for :class:`sklearn.pipeline.Pipeline` (metadata routing only).
    memory : str or object with the joblib.Memory interface, default=None
        Caches the fitted transformers.
    verbose : bool, default=False
        Print the time each step takes to fit.

    See Also
    --------
    make_pipeline : Build a pipeline with step names derived from the classes.

    Examples
    --------
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc import XRLinearClassifier, as_label_sets
    >>> from skxmc.pipeline import Pipeline
    >>> texts = ["red apple", "green apple", "red car", "fast car", "green pear", "fast bike"]
    >>> labels = as_label_sets([["fruit", "red"], ["fruit"], ["vehicle", "red"], ["vehicle"],
    ...                         ["fruit"], ["vehicle"]])
    >>> pipe = Pipeline([("tfidf", TfidfVectorizer()), ("xr", XRLinearClassifier(top_k=2))])
    >>> top_labels, top_scores = pipe.fit(texts, labels).predict_topk(["fast car"], k=1)
    >>> top_labels.tolist()
    [['vehicle']]
    """

    @available_if(_final_estimator_has("predict_topk"))
    def predict_topk(self, X: Any, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Transform ``X`` through the steps, then call ``predict_topk`` of the final step.

        Only present when the final step has ``predict_topk`` (skxmc's rankers).

        Parameters
        ----------
        X : iterable
            Input of the first step (texts for a vectoriser).
        k : int, default=None
            Labels per sample; ``None`` uses the final step's ``top_k``.

        Returns
        -------
        labels : ndarray of shape (n_samples, k)
            The top-k labels of each sample, best first.
        scores : ndarray of shape (n_samples, k)
            Their scores.
        """
        check_is_fitted(self)
        Xt = X
        # As Pipeline.predict without metadata routing: predict_topk takes no metadata, so
        # the intermediate transforms get none with routing enabled either.
        for _, _, transform in self._iter(with_final=False):
            Xt = transform.transform(Xt)
        return self.steps[-1][1].predict_topk(Xt, k=k)

    @available_if(_final_estimator_has("explain"))
    def explain(self, X: Any, k: int = 5, **kwargs: Any) -> list:
        """Transform ``X`` through the steps, then call ``explain`` of the final step,
        with the names of the features it sees.

        Only present when the final step has ``explain`` (e.g.
        :meth:`skxmc.XRLinearClassifier.explain`). When the steps before it name their
        output features (``get_feature_names_out``, as ``TfidfVectorizer`` does: the
        terms), they are passed as ``feature_names`` unless given.

        Parameters
        ----------
        X : iterable
            Input of the first step (texts for a vectoriser).
        k : int, default=5
            Labels explained per sample.
        **kwargs
            Further keywords of the final step's ``explain`` (e.g. ``n_features``).

        Returns
        -------
        list
            What the final step's ``explain`` returns: per sample, its explained labels.
        """
        check_is_fitted(self)
        Xt = X
        for _, _, transform in self._iter(with_final=False):
            Xt = transform.transform(Xt)
        final = self.steps[-1][1]
        if kwargs.get("feature_names") is None and len(self.steps) > 1:
            names = self._transformed_feature_names()
            if names is not None:
                kwargs["feature_names"] = names
        return final.explain(Xt, k, **kwargs)

    def _transformed_feature_names(self) -> np.ndarray | None:
        """Names of the features the final step sees, or None when a step cannot name
        its output (no ``get_feature_names_out``, or it refuses)."""
        try:
            return np.asarray(self[:-1].get_feature_names_out(), dtype=object)
        except (AttributeError, ValueError, TypeError, NotImplementedError):
            return None


def make_pipeline(*steps: Any, **kwargs: Any) -> Pipeline:
    """:func:`sklearn.pipeline.make_pipeline`, returning an skxmc :class:`Pipeline`.

    Parameters
    ----------
    *steps : list of estimators
        The steps; their names are the lowercase class names, as in scikit-learn.
    **kwargs
        ``memory``, ``transform_input``, ``verbose``: as for
        :func:`sklearn.pipeline.make_pipeline`.

    Returns
    -------
    Pipeline
        An skxmc :class:`Pipeline`, with ``predict_topk`` when the last step has it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.feature_extraction.text import TfidfVectorizer
    >>> from skxmc import XRLinearClassifier
    >>> from skxmc.pipeline import make_pipeline
    >>> pipe = make_pipeline(TfidfVectorizer(dtype=np.float32), XRLinearClassifier())
    >>> [name for name, _ in pipe.steps]
    ['tfidfvectorizer', 'xrlinearclassifier']
    >>> hasattr(pipe, "predict_topk")
    True
    """
    # sklearn names the steps and validates the keywords; keep its behaviour exactly.
    return Pipeline(**_sklearn_make_pipeline(*steps, **kwargs).get_params(deep=False))
