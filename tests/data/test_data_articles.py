"""Tests of the article sources: local files, a fake TFDS GEM builder, a fake `datasets`."""

import sys
import types

import pytest

from seahorse_metrics.data import articles
from seahorse_metrics.data.articles import (
    ArticleSourceError,
    HfArticleSource,
    LocalArticleSource,
    MissingDependencyError,
    TfdsArticleSource,
)

from fixtures import tiny_data

ALL_IDS = sorted(tiny_data.ARTICLES)


def test_local_jsonl_and_tsv(tmp_path):
    jsonl = tiny_data.write_articles(str(tmp_path / "a.jsonl"))
    source = LocalArticleSource(jsonl)
    assert isinstance(source, articles.ArticleSource)
    assert source.fetch(ALL_IDS + ["xsum-test-999"]) == tiny_data.ARTICLES
    tsv = tmp_path / "a.tsv"
    tsv.write_text("gem_id\ttext\nxsum-validation-101\tA text\twith a tab\n", encoding="utf-8")
    assert LocalArticleSource(str(tsv)).fetch(["xsum-validation-101"]) == {
        "xsum-validation-101": "A text\twith a tab"
    }


def test_local_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"gem_id": "a", "text": "x"}\n{"gem_id": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: field 'text' missing"):
        LocalArticleSource(str(bad)).fetch(["a"])
    bad.write_text('{"gem_id": "a", "text": "x"}\n{"gem_id": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"bad\.jsonl:2: gem_id 'a' has a different text than on line 1"
    ):
        LocalArticleSource(str(bad)).fetch(["a"])
    bad.write_bytes(b'{"gem_id": "a", "text": "x"}\n{"gem_id": "b", "text": "\xff"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not valid UTF-8"):
        LocalArticleSource(str(bad)).fetch(["a"])
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("id\ttext\na\tx\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:1: expected the header"):
        LocalArticleSource(str(tsv)).fetch(["a"])
    tsv.write_text("gem_id\ttext\na x\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: expected gem_id<TAB>text"):
        LocalArticleSource(str(tsv)).fetch(["a"])
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown article file type"):
        LocalArticleSource(str(tmp_path / "a.txt")).fetch([])
    with pytest.raises(FileNotFoundError):
        LocalArticleSource(str(tmp_path / "none.jsonl")).fetch(["a"])


def _fake_datasets_module(calls, available_splits=("validation", "test")):
    """A stand-in for the `datasets` package with the real `load_dataset` signature."""

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split, kwargs))
        if split not in available_splits:
            raise ValueError(f'Unknown split "{split}". Should be one of {list(available_splits)}.')
        config = {
            ("GEM/xsum", None): "xsum",
            ("GEM/mlsum", "de"): "mlsum_de",
            ("GEM/mlsum", "es"): "mlsum_es",
            ("GEM/xlsum", "english"): "xlsum_english",
            ("GEM/xlsum", "spanish"): "xlsum_spanish",
            ("GEM/xlsum", "vietnamese"): "xlsum_vietnamese",
        }.get((path, name), name)
        field = articles.GEM_TEXT_FIELDS[articles.source_of_gem_id(config)]
        rows = [{"gem_id": f"{config}-{split}-0", field: "decoy", "target": "t"}]
        for gem_id, text in tiny_data.ARTICLES.items():
            gem_split = articles.gem_split(gem_id)
            if (
                gem_id.startswith(config + "-")
                and articles._SPLIT_ALIASES.get(gem_split, gem_split) == split
            ):
                rows.append({"gem_id": gem_id, field: text, "target": "t"})
        return rows

    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    return module


def test_hf_source_with_a_fake_datasets_module(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "datasets", _fake_datasets_module(calls))
    found = HfArticleSource(cache_dir="/tmp/hf-cache").fetch(ALL_IDS)
    assert found == tiny_data.ARTICLES
    loaded = {(path, name, split) for path, name, split, _ in calls}
    assert ("GEM/xlsum", "english", "validation") in loaded
    assert ("GEM/mlsum", "es", "test") in loaded
    assert ("GEM/xsum", None, "validation") in loaded
    # GEMv1 wiki_lingua: pinned revision, its `val` ids come from the validation split.
    wiki = [c for c in calls if c[0] == "GEM/wiki_lingua"]
    assert {(c[1], c[2]) for c in wiki} == {
        ("wiki_lingua_russian_ru", "validation"),
        ("wiki_lingua_turkish_tr", "test"),
    }
    assert all(c[3]["revision"] == articles.GEMV1_WIKI_LINGUA_REVISION for c in wiki)
    assert all(c[3]["cache_dir"] == "/tmp/hf-cache" for c in calls)


def test_hf_source_unknown_split_leaves_articles_missing(monkeypatch):
    calls = []
    monkeypatch.setitem(
        sys.modules, "datasets", _fake_datasets_module(calls, available_splits=("test",))
    )
    found = HfArticleSource().fetch(["xsum-validation-101", "mlsum_es-test-3"])
    assert found == {"mlsum_es-test-3": tiny_data.ARTICLES["mlsum_es-test-3"]}


def test_hf_source_load_errors_are_not_missing_articles(monkeypatch):
    module = types.ModuleType("datasets")

    def load_dataset(path, name=None, split=None, **kwargs):
        raise ValueError(f"BuilderConfig '{name}' not found. Available: ['de', 'es']")

    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    with pytest.raises(ArticleSourceError, match="cannot load GEM/mlsum"):
        HfArticleSource().fetch(["mlsum_de-validation-7"])


def test_hf_source_without_datasets_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingDependencyError, match=r"seahorse-metrics\[hf\]"):
        HfArticleSource().fetch(["xsum-validation-101"])


def test_hf_specs():
    assert articles.default_hf_spec("xlsum_english") == articles.HfSpec(
        "GEM/xlsum", "english", "text"
    )
    assert articles.default_hf_spec("mlsum_de").name == "de"
    assert articles.default_hf_spec("xsum").text_field == "document"
    with pytest.raises(ValueError):
        articles.default_hf_spec("cnn_dailymail")


@pytest.fixture(scope="module")
def fake_gem_builder():
    """A small TFDS builder shaped like TFDS's `gem` (configs, fields, gem_ids)."""
    import tensorflow_datasets as tfds

    configs = ("xsum", "wiki_lingua_russian_ru")

    class SeahorseTestGem(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")
        BUILDER_CONFIGS = [tfds.core.BuilderConfig(name=c) for c in configs]

        def _field(self):
            return articles.GEM_TEXT_FIELDS[articles.source_of_gem_id(self.builder_config.name)]

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict(
                    {"gem_id": tfds.features.Text(), self._field(): tfds.features.Text()}
                ),
            )

        def _split_generators(self, dl_manager):
            return {split: self._generate_examples(split) for split in ("validation", "test")}

        def _generate_examples(self, split):
            config = self.builder_config.name
            yield "decoy", {"gem_id": f"{config}-{split}-0", self._field(): "decoy"}
            for gem_id, text in tiny_data.ARTICLES.items():
                gem_split = articles.gem_split(gem_id)
                if (
                    gem_id.startswith(config + "-")
                    and articles._SPLIT_ALIASES.get(gem_split, gem_split) == split
                ):
                    yield gem_id, {"gem_id": gem_id, self._field(): text}

    return "seahorse_test_gem"


@pytest.mark.slow  # TFDS writes its records through TensorFlow (~20 s on 2 cores).
def test_tfds_source_with_a_fake_gem_builder(fake_gem_builder, tmp_path):
    data_dir = str(tmp_path / "tfds")
    with pytest.raises(ArticleSourceError, match="not prepared"):
        TfdsArticleSource(data_dir=data_dir, builder_name=fake_gem_builder).fetch(
            ["xsum-validation-101"]
        )
    source = TfdsArticleSource(data_dir=data_dir, download=True, builder_name=fake_gem_builder)
    wanted = [
        "xsum-validation-101",
        "wiki_lingua_russian_ru-val-12",
        "xlsum_english-validation-6416",
        "xsum-test-404",
    ]
    found = source.fetch(wanted)
    # Found by the examples' own gem_ids (`val` ids in the validation split); TFDS
    # has no XL-Sum, so that one stays missing, as does an id GEM does not have.
    assert found == {g: tiny_data.ARTICLES[g] for g in wanted[:2]}
    # Once prepared, no download is needed.
    assert TfdsArticleSource(data_dir=data_dir, builder_name=fake_gem_builder).fetch(
        ["wiki_lingua_russian_ru-val-12"]
    ) == {"wiki_lingua_russian_ru-val-12": tiny_data.ARTICLES["wiki_lingua_russian_ru-val-12"]}


def test_make_article_source(tmp_path):
    assert isinstance(articles.make_article_source("tfds"), TfdsArticleSource)
    assert isinstance(articles.make_article_source("hf"), HfArticleSource)
    assert isinstance(articles.make_article_source("local", path="x.jsonl"), LocalArticleSource)
    with pytest.raises(ValueError, match="--articles"):
        articles.make_article_source("local")
    with pytest.raises(ValueError, match="unknown article source"):
        articles.make_article_source("s3")
