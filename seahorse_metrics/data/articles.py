"""Where the articles of the SEAHORSE release come from.

The release holds summaries only; each row names its article by GEM id. An
`ArticleSource` maps gem_ids to article text. Three implementations:

* `LocalArticleSource`: a JSONL (`{"gem_id": ..., "text": ...}` per line) or
  TSV (header `gem_id<TAB>text`) file. Always available.
* `TfdsArticleSource`: TensorFlow Datasets' `gem` builder (configs `xsum`,
  `mlsum_de`, `mlsum_es`, `wiki_lingua_<language>_<code>`). TFDS has no
  XL-Sum config, so xlsum articles are reported missing by this source.
* `HfArticleSource`: Hugging Face `datasets` (`pip install
  'seahorse-metrics[hf]'`): GEMv2 `GEM/xsum`, `GEM/mlsum` (de, es) and
  `GEM/xlsum` (<language>), and GEMv1 wiki_lingua, as the release's README
  prescribes.

Both GEM sources look an article up by the `gem_id` field of the GEM example
itself, so they do not depend on how a split is spelt inside the id (GEMv1
wiki_lingua ids say `val` where the builders' split is `validation`).
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import logging
import os
from typing import Any, Collection, Iterable, Mapping, Optional, Protocol, runtime_checkable

from seahorse_metrics.data.seahorse import gem_config, gem_split, source_of_gem_id
from seahorse_metrics.io.json_files import json_object

logger = logging.getLogger(__name__)

# The GEM field that holds the article, per source dataset.
GEM_TEXT_FIELDS = {"xsum": "document", "mlsum": "text", "xlsum": "text", "wiki_lingua": "source"}
# The split a gem_id names -> the split name of the GEM builders.
_SPLIT_ALIASES = {"val": "validation", "dev": "validation"}
# The GEM/wiki_lingua revision with the GEMv1 configs (`wiki_lingua_<language>_<code>`)
# that reproductions of SEAHORSE pin: the release's wiki_lingua ids are GEMv1
# ids, and later revisions hold the GEMv2 configs (`en`, `es_en`, ...).
GEMV1_WIKI_LINGUA_REVISION = "b864b63e079d381a1bd92723d36107153ba23921"


class MissingDependencyError(ImportError):
    """An optional dependency needed for the requested feature is not installed."""


class ArticleSourceError(RuntimeError):
    """An article source cannot provide the articles it was asked for."""


@runtime_checkable
class ArticleSource(Protocol):
    """Maps GEM ids to article text.

    `fetch` returns the articles it found; ids it cannot find are simply
    absent from the result, and the caller (`prepare`) reports them.
    """

    name: str

    def fetch(self, gem_ids: Collection[str]) -> dict[str, str]:
        """Returns `{gem_id: article}` for the ids this source holds."""
        ...


def _group_by_config_split(gem_ids: Iterable[str]) -> dict[tuple[str, str], set[str]]:
    groups: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for gem_id in gem_ids:
        split = gem_split(gem_id)
        if split is None or source_of_gem_id(gem_id) is None:
            continue
        groups[(gem_config(gem_id), _SPLIT_ALIASES.get(split, split))].add(gem_id)
    return dict(sorted(groups.items()))


def _as_text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class LocalArticleSource:
    """Articles from a local JSONL or TSV file.

    JSONL: one object per line with the fields `gem_id` and `text` (the field
    name is configurable). TSV: a header row with `gem_id` and `text` columns;
    the text is everything after the gem_id's tab, so it may hold tabs.

    Args:
      path: The `.jsonl`/`.json` or `.tsv` file.
      text_field: The field/column holding the article.
    """

    def __init__(self, path: str | os.PathLike, text_field: str = "text"):
        self.path = os.fspath(path)
        self.text_field = text_field
        self.name = f"local:{self.path}"
        self._articles: Optional[dict[str, str]] = None

    def fetch(self, gem_ids: Collection[str]) -> dict[str, str]:
        articles = self._load()
        return {g: articles[g] for g in gem_ids if g in articles}

    def __len__(self) -> int:
        return len(self._load())

    def _load(self) -> dict[str, str]:
        if self._articles is None:
            if not os.path.isfile(self.path):
                raise FileNotFoundError(f"{self.path}: article file not found")
            extension = os.path.splitext(self.path)[1].lower()
            if extension in (".jsonl", ".json"):
                entries = self._read_jsonl()
            elif extension == ".tsv":
                entries = self._read_tsv()
            else:
                raise ValueError(
                    f"{self.path}: unknown article file type {extension!r}; use .jsonl "
                    '({"gem_id": ..., "text": ...} per line) or .tsv (gem_id<TAB>text)'
                )
            self._articles = self._index(entries)
            logger.info("%s: %d articles", self.path, len(self._articles))
        return self._articles

    def _index(self, entries: Iterable[tuple[int, str, str]]) -> dict[str, str]:
        articles: dict[str, str] = {}
        first_line: dict[str, int] = {}
        for line_number, gem_id, text in entries:
            if gem_id in articles and articles[gem_id] != text:
                raise ValueError(
                    f"{self.path}:{line_number}: gem_id {gem_id!r} has a different "
                    f"text than on line {first_line[gem_id]}; keep one article per id"
                )
            articles[gem_id] = text
            first_line.setdefault(gem_id, line_number)
        return articles

    def _lines(self) -> Iterable[tuple[int, str]]:
        """(line number, text) of each non-blank line; bad UTF-8 names its line."""
        with open(self.path, "rb") as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(
                        f"{self.path}:{line_number}: not valid UTF-8 (byte {err.start})"
                    ) from None
                line = line.rstrip("\r\n")
                if line.strip():
                    yield line_number, line

    def _read_jsonl(self) -> Iterable[tuple[int, str, str]]:
        for line_number, line in self._lines():
            record, error = json_object(line)
            if error is not None:
                raise ValueError(f"{self.path}:{line_number}: {error}")
            for field in ("gem_id", self.text_field):
                if not isinstance(record.get(field), str):
                    raise ValueError(
                        f"{self.path}:{line_number}: field {field!r} missing or not a "
                        f"string (fields present: {sorted(record)})"
                    )
            yield line_number, record["gem_id"], record[self.text_field]

    def _read_tsv(self) -> Iterable[tuple[int, str, str]]:
        lines = iter(self._lines())
        first = next(lines, (1, ""))
        if first[1].split("\t") != ["gem_id", self.text_field]:
            raise ValueError(
                f"{self.path}:{first[0]}: expected the header `gem_id<TAB>{self.text_field}`, "
                f"got {first[1]!r}"
            )
        for line_number, line in lines:
            gem_id, sep, text = line.partition("\t")
            if not sep:
                raise ValueError(f"{self.path}:{line_number}: expected gem_id<TAB>text")
            yield line_number, gem_id, text


class TfdsArticleSource:
    """Articles from TensorFlow Datasets' GEM builder (`gem/<config>`).

    Args:
      data_dir: TFDS data directory (None: the TFDS default).
      download: Whether to download and prepare configs that are not
        prepared yet. When False, an unprepared config is an error that says
        how to prepare it.
      builder_name: The TFDS builder (tests substitute a small fake one).
    """

    def __init__(
        self,
        data_dir: Optional[str] = None,
        download: bool = False,
        builder_name: str = "gem",
    ):
        self.data_dir = data_dir
        self.download = download
        self.builder_name = builder_name
        self.name = f"tfds:{builder_name}"

    def fetch(self, gem_ids: Collection[str]) -> dict[str, str]:
        tfds = _import_optional("tensorflow_datasets", "pip install tensorflow-datasets")
        found: dict[str, str] = {}
        for (config, split), wanted in _group_by_config_split(gem_ids).items():
            dataset = source_of_gem_id(config)
            if dataset == "xlsum":
                logger.warning(
                    "TFDS has no GEM XL-Sum config: %d %s articles stay missing; use "
                    "--article_source hf or a local article file for them",
                    len(wanted),
                    config,
                )
                continue
            builder = self._builder(tfds, config)
            if split not in builder.info.splits:
                logger.warning(
                    "%s/%s has no split %r: %d articles stay missing",
                    self.builder_name,
                    config,
                    split,
                    len(wanted),
                )
                continue
            text_field = GEM_TEXT_FIELDS[dataset]
            for example in tfds.as_numpy(builder.as_dataset(split=split)):
                gem_id = _as_text(example["gem_id"])
                if gem_id in wanted:
                    found[gem_id] = _as_text(example[text_field])
        return found

    def _builder(self, tfds, config: str):
        name = f"{self.builder_name}/{config}"
        try:
            builder = tfds.builder(name, data_dir=self.data_dir)
        except Exception as err:  # TFDS raises several registry error types.
            raise ArticleSourceError(f"TFDS builder {name!r} is not available: {err}") from err
        if not builder.is_prepared():
            if not self.download:
                raise ArticleSourceError(
                    f"TFDS dataset {name!r} is not prepared in {builder.data_dir!r}; "
                    f"run `tfds build {self.builder_name} --config {config}` or pass "
                    "download=True (CLI: --tfds_download)"
                )
            builder.download_and_prepare()
        return builder


@dataclasses.dataclass(frozen=True)
class HfSpec:
    """How to load one GEM config with `datasets.load_dataset`.

    Attributes:
      path: Hub dataset, e.g. `GEM/xlsum`.
      name: Config name, e.g. `english` (None for single-config datasets).
      text_field: Field holding the article.
      load_kwargs: Further keyword arguments (`revision`, ...).
    """

    path: str
    name: Optional[str]
    text_field: str
    load_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def default_hf_spec(config: str, wiki_lingua_revision: str = GEMV1_WIKI_LINGUA_REVISION) -> HfSpec:
    """The Hugging Face dataset holding the articles of a GEM config.

    Args:
      config: A gem_id prefix: `xsum`, `mlsum_de`, `xlsum_english`,
        `wiki_lingua_spanish_es`, ...
      wiki_lingua_revision: Revision of `GEM/wiki_lingua` with the GEMv1
        configs.

    Raises:
      ValueError: for a config outside the four SEAHORSE sources.
    """
    dataset = source_of_gem_id(config)
    if dataset == "xsum":
        return HfSpec("GEM/xsum", None, "document")
    if dataset in ("mlsum", "xlsum"):
        return HfSpec(f"GEM/{dataset}", config[len(dataset) + 1 :], "text")
    if dataset == "wiki_lingua":
        # That revision is a loading script, which `datasets` runs only with
        # trust_remote_code; the pinned revision fixes the code it runs.
        return HfSpec(
            "GEM/wiki_lingua",
            config,
            "source",
            {"revision": wiki_lingua_revision, "trust_remote_code": True},
        )
    raise ValueError(f"no Hugging Face GEM dataset for the config {config!r}")


class HfArticleSource:
    """Articles from Hugging Face `datasets` (GEMv2; GEMv1 for wiki_lingua).

    Args:
      cache_dir: `datasets` cache directory (None: its default).
      wiki_lingua_revision: Revision of `GEM/wiki_lingua` with GEMv1 configs.
      specs: Overrides of `default_hf_spec`, by GEM config.
    """

    def __init__(
        self,
        cache_dir: Optional[str] = None,
        wiki_lingua_revision: str = GEMV1_WIKI_LINGUA_REVISION,
        specs: Optional[Mapping[str, HfSpec]] = None,
    ):
        self.cache_dir = cache_dir
        self.wiki_lingua_revision = wiki_lingua_revision
        self.specs = dict(specs or {})
        self.name = "hf:GEM"

    def spec(self, config: str) -> HfSpec:
        """The `HfSpec` used for a GEM config."""
        return self.specs.get(config) or default_hf_spec(config, self.wiki_lingua_revision)

    def fetch(self, gem_ids: Collection[str]) -> dict[str, str]:
        datasets = _import_optional("datasets", "pip install 'seahorse-metrics[hf]'")
        found: dict[str, str] = {}
        for (config, split), wanted in _group_by_config_split(gem_ids).items():
            spec = self.spec(config)
            kwargs = dict(spec.load_kwargs)
            if self.cache_dir is not None:
                kwargs["cache_dir"] = self.cache_dir
            logger.info("loading %s (%s) split %s", spec.path, spec.name, split)
            try:
                rows = datasets.load_dataset(spec.path, spec.name, split=split, **kwargs)
            except ValueError as err:
                if "split" not in str(err).lower():
                    raise ArticleSourceError(
                        f"cannot load {spec.path} ({spec.name}) split {split}: {err}"
                    ) from err
                # An unknown split: its articles are reported missing.
                logger.warning(
                    "%s (%s) has no split %r (%s): %d articles stay missing",
                    spec.path,
                    spec.name,
                    split,
                    err,
                    len(wanted),
                )
                continue
            for example in rows:
                gem_id = example["gem_id"]
                if gem_id in wanted:
                    found[gem_id] = example[spec.text_field]
        return found


def _import_optional(module: str, install_hint: str):
    """Imports an optional dependency, or says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingDependencyError(
            f"this article source needs `{module}`, which is not installed: {install_hint}"
        ) from err


def make_article_source(
    kind: str,
    path: Optional[str] = None,
    tfds_data_dir: Optional[str] = None,
    tfds_download: bool = False,
    hf_cache_dir: Optional[str] = None,
) -> ArticleSource:
    """Builds an article source by kind: `local` (needs `path`), `tfds` or `hf`.

    Raises:
      ValueError: for an unknown kind, or `local` without a path.
    """
    if kind == "local":
        if not path:
            raise ValueError("the local article source needs a file: pass --articles PATH")
        return LocalArticleSource(path)
    if kind == "tfds":
        return TfdsArticleSource(data_dir=tfds_data_dir, download=tfds_download)
    if kind == "hf":
        return HfArticleSource(cache_dir=hf_cache_dir)
    raise ValueError(f"unknown article source {kind!r}; choose local, tfds or hf")
