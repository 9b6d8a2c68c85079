"""Text augmentation for contrastive views: WordNet synonym substitution, deletion / swap.

The WordNet reader parses the WordNet 3.0 database files (``index.<pos>`` and
``data.<pos>``, the "WNDB" format) directly, so synonym substitution needs no Python
package, only the data: Debian / Ubuntu ``apt-get install wordnet-base`` (files in
``/usr/share/wordnet``), an unzipped NLTK ``wordnet`` corpus, or any folder named by
``$SKXMC_WORDNET``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .exceptions import WordNetNotFoundError

__all__ = [
    "AUGMENTATIONS",
    "WordNet",
    "WordNetNotFoundError",
    "augment_texts",
    "delete_swap",
    "synonym_replacement",
]

#: Built-in augmentation names.
AUGMENTATIONS = ("synonym", "delete_swap")

_POS = ("noun", "verb", "adj", "adv")
# Function words are never replaced: their "synonyms" in WordNet are mostly noise
# ("a" -> "angstrom", "in" -> "indiana").
_STOPWORDS = frozenset(
    "a an the and or but if then else of to in on at by for with from into onto about as is "
    "am are was were be been being do does did have has had i me my we our you your he him "
    "his she her it its they them their this that these those what which who whom whose "
    "when where why how not no nor so too very can will just than there here all any both "
    "each few more most other some such only own same s t don should now".split()
)


def _candidate_dirs() -> list[Path]:
    dirs: list[Path] = []
    for var in ("SKXMC_WORDNET", "WNSEARCHDIR"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]).expanduser())
    nltk_roots = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    nltk_roots += [
        Path.home() / "nltk_data",
        Path(sys.prefix) / "nltk_data",
        Path(sys.prefix) / "share" / "nltk_data",
        Path(sys.prefix) / "lib" / "nltk_data",
        Path("/usr/share/nltk_data"),
        Path("/usr/local/share/nltk_data"),
        Path("/usr/lib/nltk_data"),
        Path("/usr/local/lib/nltk_data"),
    ]
    dirs += [root / "corpora" / "wordnet" for root in nltk_roots]
    dirs += [
        Path("/usr/share/wordnet"),
        Path("/usr/local/share/wordnet"),
        Path("/opt/homebrew/share/wordnet"),
        Path("/usr/local/WordNet-3.0/dict"),
    ]
    return dirs


class WordNet:
    """Synonyms from the WordNet database files (no NLTK needed).

    Parameters
    ----------
    path : str or path-like, optional
        Folder holding ``index.noun``, ``data.noun``, ... Default: the first of
        ``$SKXMC_WORDNET``, ``$WNSEARCHDIR``, the NLTK data folders
        (``<nltk_data>/corpora/wordnet``) and ``/usr/share/wordnet`` that has them.

    Raises
    ------
    WordNetNotFoundError
        If no such folder exists; the message says how to install the data.

    Examples
    --------
    >>> from skxmc._augment import WordNet
    >>> WordNet().synonyms("car")[:3]  # doctest: +SKIP
    ['auto', 'automobile', 'machine']
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = self.find(path)
        self._index: dict[str, dict[str, list[int]]] = {}
        self._cache: dict[str, list[str]] = {}

    @staticmethod
    def find(path: str | os.PathLike | None = None) -> Path:
        """The WordNet folder (see the class docstring)."""
        dirs = [Path(path).expanduser()] if path is not None else _candidate_dirs()
        for d in dirs:
            if (d / "index.noun").is_file() and (d / "data.noun").is_file():
                return d
        raise WordNetNotFoundError(
            "augmentation='synonym' needs the WordNet 3.0 database files (index.noun, "
            "data.noun, ...), which were not found in "
            f"{[str(d) for d in dirs]}. Install them with `apt-get install wordnet-base` "
            "(Debian / Ubuntu), or with `pip install nltk && python -m nltk.downloader wordnet` "
            "and unzip <nltk_data>/corpora/wordnet.zip, or point $SKXMC_WORDNET at a folder "
            "holding them. augmentation='delete_swap' needs no resource."
        )

    def _load_index(self, pos: str) -> dict[str, list[int]]:
        if pos not in self._index:
            index: dict[str, list[int]] = {}
            with open(self.path / f"index.{pos}", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith(" "):  # licence header
                        continue
                    fields = line.split()
                    n_synsets = int(fields[2])
                    index[fields[0]] = [int(o) for o in fields[-n_synsets:]]
            self._index[pos] = index
        return self._index[pos]

    def synonyms(self, word: str) -> list[str]:
        """Other lemmas of every synset of ``word`` (all parts of speech), most frequent
        senses first, without duplicates; multi-word lemmas joined by spaces."""
        key = word.lower()
        if key in self._cache:
            return self._cache[key]
        out: dict[str, None] = {}
        for pos in _POS:
            offsets = self._load_index(pos).get(key.replace(" ", "_"))
            if not offsets:
                continue
            with open(self.path / f"data.{pos}", "rb") as fh:
                for offset in offsets:
                    fh.seek(offset)
                    fields = fh.readline().decode("utf-8", "replace").split()
                    n_words = int(fields[3], 16)
                    for lemma in fields[4 : 4 + 2 * n_words : 2]:
                        lemma = lemma.split("(")[0].replace("_", " ")  # drop "(a)" markers
                        if lemma.lower() != key:
                            out[lemma] = None
        self._cache[key] = list(out)
        return self._cache[key]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_index": {}, "_cache": {}}  # the index is rebuilt


def synonym_replacement(
    text: str, rng: np.random.Generator, wordnet: WordNet, p: float = 0.1
) -> str:
    """Replace ``max(1, p * n_words)`` random content words by a random WordNet synonym
    (the word substitution of EDA, Wei & Zou 2019, the SharpReCL paper's default view)."""
    words = text.split()
    candidates = [i for i, w in enumerate(words) if w.isalpha() and w.lower() not in _STOPWORDS]
    n_replace = max(1, int(p * len(words)))
    replaced = 0
    for i in rng.permutation(candidates) if candidates else []:
        options = wordnet.synonyms(words[i])
        if options:
            words[int(i)] = options[int(rng.integers(len(options)))]
            replaced += 1
            if replaced >= n_replace:
                break
    return " ".join(words)


def delete_swap(text: str, rng: np.random.Generator, p: float = 0.1) -> str:
    """Random deletion (each word with probability ``p``, at least one word kept), then
    ``max(1, p * n_words)`` random swaps of two words (EDA's resource-free operations)."""
    words = text.split()
    if len(words) <= 1:
        return text
    keep = rng.random(len(words)) >= p
    if not keep.any():
        keep[rng.integers(len(words))] = True
    words = [w for w, k in zip(words, keep) if k]
    if len(words) > 1:
        for _ in range(max(1, int(p * len(words)))):
            i, j = rng.choice(len(words), size=2, replace=False)
            words[i], words[j] = words[j], words[i]
    return " ".join(words)


def _check_augmented(out: Any, texts: list, method: Callable) -> list:
    """The output of an augmentation callable as a list, checked against its input: one
    text (or pair) per input text, of the same kind."""
    name = getattr(method, "__qualname__", None) or type(method).__name__
    kind = "strings" if all(isinstance(t, str) for t in texts) else "texts or text pairs"
    expected = f"a list of {len(texts)} {kind} (one view per input text, in order)"
    # A bare string is iterable too, but as characters: refuse it like a number.
    if isinstance(out, (str, bytes, Mapping)) or not isinstance(out, Iterable):
        raise TypeError(
            f"augmentation={name} must return {expected}; it returned {type(out).__name__}."
        )
    out = list(out)
    if len(out) != len(texts):
        raise ValueError(
            f"augmentation={name} must return {expected}; it returned {len(out)} items."
        )
    for i, (view, text) in enumerate(zip(out, texts)):
        if isinstance(text, str):
            ok = isinstance(view, str)
        else:  # a text pair: a pair of strings
            ok = (
                isinstance(view, (tuple, list))
                and len(view) == 2
                and all(isinstance(s, str) for s in view)
            )
        if not ok:
            kind = "a str" if isinstance(text, str) else "a (str, str) pair"
            raise TypeError(
                f"augmentation={name} must return {expected}; item {i} is "
                f"{type(view).__name__} ({view!r:.50}), expected {kind} like the input."
            )
    return [v if isinstance(v, str) else tuple(v) for v in out]


def augment_texts(
    texts: Sequence,
    method: str | Callable[[list], Sequence] | None,
    *,
    p: float = 0.1,
    random_state: int | np.random.Generator | None = None,
    wordnet: WordNet | None = None,
) -> list:
    """One augmented view of each text (or of each side of a text pair).

    Parameters
    ----------
    texts : sequence of str or of (str, str)
    method : {"synonym", "delete_swap"}, callable or None
        ``"synonym"``: WordNet synonym substitution (needs the WordNet files, see
        :class:`WordNet`); ``"delete_swap"``: random deletion and swaps, no resource;
        a callable: ``method(texts) -> sequence`` of the same length; None: the texts
        unchanged (the views then differ only by dropout).
    p : float, default=0.1
        Share of the words changed by the built-in methods.
    random_state : int, numpy.random.Generator or None, default=None
    wordnet : WordNet, optional
        A loaded WordNet to reuse.

    Returns
    -------
    augmented : list

    Examples
    --------
    >>> from skxmc._augment import augment_texts
    >>> augment_texts(["one two three four"], "delete_swap", p=0.5, random_state=0)
    ['one']
    """
    texts = list(texts)
    if method is None:
        return texts
    if callable(method):
        return _check_augmented(method(texts), texts, method)
    rng = np.random.default_rng(random_state)
    if method == "synonym":
        wn = wordnet if wordnet is not None else WordNet()
        one: Callable[[str], str] = lambda t: synonym_replacement(t, rng, wn, p)  # noqa: E731
    elif method == "delete_swap":
        one = lambda t: delete_swap(t, rng, p)  # noqa: E731
    else:
        raise ValueError(
            f"augmentation must be one of {AUGMENTATIONS}, a callable or None, got {method!r}."
        )
    return [one(t) if isinstance(t, str) else tuple(one(s) for s in t) for t in texts]
