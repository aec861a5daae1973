"""Checks of the bundled synthetic sample and its SentencePiece model.

The sample (`seahorse_metrics/data/sample/`) is made by `python -m demo_data.sample`
and the vocabulary by `python -m demo_data.vocab`. These tests check that the files
parse as their formats require, that counts and rates are the documented
ones, that regenerating reproduces the same bytes, and that each question's
"No" is carried by the signal the README promises.
"""

from __future__ import annotations

import csv
import functools
import gzip
import json
import os
import re
import statistics

import numpy as np
import pytest
import sentencepiece as spm

import demo_data.vocab
from demo_data.sample import build
from demo_data.sample.corpus import CORPUS_PAIRS_PER_LANG
from demo_data.sample.languages import LANGS
from demo_data.sample.mface import MFACE_COLUMNS

from fixtures import paths

REPO = paths.REPO
SAMPLE = os.path.join(REPO, "seahorse_metrics", "data", "sample")
SPLITS = ("train", "validation", "test")
HEADER = ["gem_id", "worker_lang", "summary", "model"] + [f"question{q}" for q in range(1, 7)]
RATINGS = {"Yes", "No", "Unsure", ""}
GEM_ID_RE = re.compile(
    r"^(xsum|mlsum_(de|es)|xlsum_(english|spanish|russian|turkish|vietnamese)"
    r"|wiki_lingua_(english_en|german_de|spanish_es|russian_ru|turkish_tr|vietnamese_vi))"
    r"-(train|validation|test)-\d+$"
)
# Documented in the sample README: Yes-rates among Yes/No cells, per question.
YES_RATE_BANDS = {
    1: (0.74, 0.84),
    2: (0.76, 0.86),
    3: (0.68, 0.78),
    4: (0.45, 0.56),
    5: (0.50, 0.62),
    6: (0.42, 0.55),
}


@pytest.fixture(scope="module")
def stats():
    with open(os.path.join(SAMPLE, "stats.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def articles():
    by_id = {}
    with open(os.path.join(SAMPLE, "seahorse", "articles.jsonl"), encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            assert set(record) == {"gem_id", "text"}
            assert record["gem_id"] not in by_id, f"duplicate article {record['gem_id']}"
            by_id[record["gem_id"]] = record["text"]
    return by_id


def _read_split(split):
    with open(os.path.join(SAMPLE, "seahorse", f"{split}.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[0], [dict(zip(HEADER, r)) | {"_n": len(r)} for r in rows[1:]]


@pytest.fixture(scope="module")
def splits():
    return {split: _read_split(split) for split in SPLITS}


@pytest.fixture(scope="module")
def vocab():
    return spm.SentencePieceProcessor(model_file=os.path.join(SAMPLE, "spiece.model"))


# --------------------------------------------------------------------- format


def test_tsvs_have_release_format_and_documented_counts(splits, stats):
    for split, (header, rows) in splits.items():
        assert header == HEADER
        assert {r["_n"] for r in rows} == {10}, f"{split}: a row without 10 tab-separated cells"
        assert len(rows) == stats["seahorse"][split]["rows"]
        for r in rows:
            assert GEM_ID_RE.match(r["gem_id"]), r["gem_id"]
            assert r["worker_lang"] in {"de", "en-US", "es-ES", "ru", "tr", "vi"}
            assert r["summary"] and r["summary"] == r["summary"].strip()
            assert {r[f"question{q}"] for q in range(1, 7)} <= RATINGS
    assert 3000 <= len(splits["train"][1]) <= 4000
    assert len(splits["validation"][1]) == len(splits["test"][1]) == 1000


def test_every_gem_id_has_an_article_and_splits_share_none(splits, articles):
    used = {split: {r["gem_id"] for r in rows} for split, (_, rows) in splits.items()}
    assert set().union(*used.values()) == set(articles)
    assert not used["train"] & used["test"] and not used["train"] & used["validation"]
    assert not used["validation"] & used["test"]
    sentences = [len(re.findall(r"\.(?:\s|$)", text)) for text in articles.values()]
    assert min(sentences) >= 3 and max(sentences) <= 6


def test_release_quirks(splits):
    for split, (_, rows) in splits.items():
        q1_no = [r for r in rows if r["question1"] == "No"]
        assert q1_no and all(r[f"question{q}"] == "" for r in q1_no for q in range(2, 7))
        cells = [r[f"question{q}"] for r in rows for q in range(1, 7) if r[f"question{q}"]]
        assert 0.02 <= cells.count("Unsure") / len(cells) <= 0.045, split
        stray_empty = [
            r
            for r in rows
            if r["question1"] != "No" and any(r[f"question{q}"] == "" for q in range(2, 7))
        ]
        assert stray_empty, f"{split}: no empty cell outside Q1-No rows"


def test_languages_sources_and_systems(splits, stats):
    _, rows = splits["train"]
    assert {r["worker_lang"] for r in rows} == {"de", "en-US", "es-ES", "ru", "tr", "vi"}
    sources = {
        m.group(1).split("_")[0]
        for r in rows
        for m in [re.match(r"^(xsum|mlsum|xlsum|wiki_lingua)", r["gem_id"])]
    }
    assert sources == {"xsum", "mlsum", "xlsum", "wiki"}
    assert set(stats["seahorse"]["train"]["sources"]) == {"xsum", "mlsum", "xlsum", "wiki_lingua"}
    systems = {r["model"] for r in rows}
    assert "reference" in systems and len(systems) >= 6
    per_article = {}
    for r in rows:
        per_article.setdefault(r["gem_id"], set()).add(r["model"])
    assert statistics.mean(len(s) for s in per_article.values()) > 2
    # t5_base only summarised English, as in the release.
    assert {r["worker_lang"] for r in rows if r["model"].startswith("t5_base")} == {"en-US"}


def test_yes_rates_are_the_documented_ones(splits, stats):
    for split, (_, rows) in splits.items():
        for q, (low, high) in YES_RATE_BANDS.items():
            cells = [r[f"question{q}"] for r in rows]
            rate = cells.count("Yes") / (cells.count("Yes") + cells.count("No"))
            assert low <= rate <= high, f"{split} Q{q}: yes-rate {rate:.3f}"
            assert rate == pytest.approx(
                stats["seahorse"][split]["ratings"][f"question{q}"]["yes_rate"], abs=1e-4
            )


def test_readme_states_the_counts(stats):
    with open(os.path.join(SAMPLE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "SYNTHETIC" in readme
    for split in SPLITS:
        split_stats = stats["seahorse"][split]
        assert f"| {split} | {split_stats['rows']} | {split_stats['articles']} |" in readme
    assert f"{stats['mface']['rows']} rows" in readme


def test_mface_sample():
    with open(os.path.join(SAMPLE, "mface", "mface_sample.csv"), encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == MFACE_COLUMNS
        rows = list(reader)
    assert 200 <= len(rows) <= 400
    langs = {r["lang"] for r in rows}
    assert {"english", "spanish", "russian", "turkish", "vietnamese"} < langs
    assert "human" in {r["system"] for r in rows}
    for r in rows:
        for q in (1, 2, 3):
            low, avg, high = (float(r[f"q{q}_{k}"]) for k in ("min", "avg", "max"))
            assert low <= avg <= high and round(avg * 3, 3) in (0, 1, 2, 3)
        assert 0.0 <= float(r["rougeL"]) <= 1.0
    # q2 (attribution) follows the same swapped-entity signal as Q4.
    assert {r["q2_max"] for r in rows} == {"0", "1"}


def test_true_and_ratings_samples():
    for name in ("frank", "summeval", "qags_x", "paws"):
        with open(os.path.join(SAMPLE, "true", f"{name}.csv"), encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            assert reader.fieldnames == ["grounding", "generated_text", "label"]
            rows = list(reader)
        assert 100 <= len(rows) <= 200
        labels = [r["label"] for r in rows]
        assert set(labels) == {"0", "1"}
    with open(os.path.join(SAMPLE, "ratings", "squality_style.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert len(records) >= 100
    assert all(set(r) == {"id", "system", "premise", "hypothesis", "rating"} for r in records)
    assert all(isinstance(r["rating"], int) and 1 <= r["rating"] <= 100 for r in records)
    assert len({r["id"] for r in records}) == len(records)


def test_corpus_pairs_are_fluent_grammatical_and_unrated(stats, articles):
    import gzip

    with gzip.open(os.path.join(SAMPLE, "corpus", "train.jsonl.gz"), "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    corpus = stats["corpus"]
    assert len(records) == corpus["pairs"] == 6 * CORPUS_PAIRS_PER_LANG
    assert all(set(r) == {"id", "lang", "text", "summary"} for r in records)
    assert {r["lang"]: 0 for r in records}.keys() == corpus["langs"].keys() == set(LANG_OF.values())
    assert len({r["id"] for r in records}) == len(records)
    # Never incomprehensible or ungrammatical; as unfaithful, off-lead or
    # padded as the references.
    kinds = {kind.split(":")[0] for kind in corpus["corruptions"]}
    assert kinds == {"q2", "q4", "q5", "q6"}
    # The corpus is not the rated data: no article of the splits comes back.
    assert not {r["text"] for r in records} & set(articles.values())


def test_sample_stays_small():
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(SAMPLE) for f in fs)
    assert total < 4_000_000


# ------------------------------------------------------------- reproducibility


def test_regeneration_is_byte_identical(tmp_path):
    build.main(["--output_dir", str(tmp_path)])
    generated = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert generated
    for relative in generated:
        with (
            open(tmp_path / relative, "rb") as new,
            open(os.path.join(SAMPLE, relative), "rb") as old,
        ):
            new_bytes, old_bytes = new.read(), old.read()
            if relative.endswith(".gz"):  # the same text; zlib versions may pack it differently
                new_bytes, old_bytes = gzip.decompress(new_bytes), gzip.decompress(old_bytes)
            assert new_bytes == old_bytes, (
                f"{relative} differs from the shipped file: re-run `python -m demo_data.sample` "
                "and `python -m demo_data.vocab` and commit the result if the change is intended"
            )


def test_vocab_retraining_is_byte_identical(tmp_path):
    out = tmp_path / "spiece.model"
    demo_data.vocab.main(["--sample_dir", SAMPLE, "--output", str(out)])
    with open(os.path.join(SAMPLE, "spiece.model"), "rb") as f:
        assert out.read_bytes() == f.read()


# ---------------------------------------------------------------- vocabulary


def test_vocab_follows_t5_conventions(vocab, articles):
    assert (vocab.pad_id(), vocab.eos_id(), vocab.unk_id(), vocab.bos_id()) == (0, 1, 2, -1)
    assert vocab.get_piece_size() == 6000
    one, zero = vocab.encode("1", out_type=str), vocab.encode("0", out_type=str)
    assert one[0] != zero[0] and "\u2581" not in (one[0], zero[0])
    unk = vocab.unk_id()
    assert all(unk not in vocab.encode(text) for text in articles.values())


def test_inputs_fit_the_demo_length(splits, articles, vocab):
    _, rows = splits["test"]
    lengths = [
        len(vocab.encode(f"premise: {articles[r['gem_id']]} hypothesis: {r['summary']}")) + 1
        for r in rows
    ]
    assert statistics.mean(lengths) < 110 and np.percentile(lengths, 95) < 160


# ------------------------------------------------------------------- signals

_NUMBER_RE = re.compile(r"\d[\d.,\u00a0 ]*\d|\d")


@functools.lru_cache(maxsize=None)
def _entity_pattern(lang):
    """One regex for all names, places and companies of a language, and the
    canonical entity each surface form stands for."""
    pack = LANGS[lang]
    canonical = {}
    for kind, values in (
        ("place", pack["places"]),
        ("surname", pack["surnames"]),
        ("org", pack["orgs"]),
    ):
        for value in values:
            forms = value if isinstance(value, tuple) else (value,)
            for form in forms:
                canonical[form] = (kind, forms[0])
    alternatives = "|".join(re.escape(f) for f in sorted(canonical, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), canonical


def _entities(lang, text):
    """Canonical names, places, companies and numbers mentioned in `text`."""
    pattern, canonical = _entity_pattern(lang)
    found = {canonical[m.group(0)] for m in pattern.finditer(text)}
    found.update(("num", re.sub(r"\D", "", n)) for n in _NUMBER_RE.findall(text))
    return found


LANG_OF = {"de": "de", "en-US": "en", "es-ES": "es", "ru": "ru", "tr": "tr", "vi": "vi"}


def _rated(rows, q):
    return [r for r in rows if r[f"question{q}"] in ("Yes", "No")]


def _rate_by_label(rows, q, predicate):
    rates = {}
    for label in ("Yes", "No"):
        chosen = [r for r in _rated(rows, q) if r[f"question{q}"] == label]
        rates[label] = sum(map(predicate, chosen)) / len(chosen)
    return rates


def test_q4_no_summaries_mention_what_the_article_does_not(splits, articles):
    _, rows = splits["test"]

    def unsupported(r):
        lang = LANG_OF[r["worker_lang"]]
        return bool(_entities(lang, r["summary"]) - _entities(lang, articles[r["gem_id"]]))

    rates = _rate_by_label(rows, 4, unsupported)
    assert rates["No"] > 0.85 and rates["Yes"] < 0.1, rates


def test_q5_no_summaries_leave_out_the_lead(splits, articles):
    _, rows = splits["test"]

    def covers_lead(r):
        lang = LANG_OF[r["worker_lang"]]
        lead = re.split(r"(?<=\.)\s", articles[r["gem_id"]])[0]
        lead_entities = _entities(lang, lead)
        return bool(_entities(lang, r["summary"]) & lead_entities)

    rates = _rate_by_label(rows, 5, covers_lead)
    assert rates["Yes"] > 0.85 and rates["No"] < 0.15, rates


def _repeats_a_bigram(r):
    words = r["summary"].lower().replace(",", "").replace(".", "").split()
    bigrams = list(zip(words, words[1:]))
    return len(set(bigrams)) < len(bigrams)


def test_q2_no_summaries_repeat_themselves(splits):
    _, rows = splits["test"]
    rates = _rate_by_label(rows, 2, _repeats_a_bigram)
    assert rates["No"] > 0.8 and rates["Yes"] < 0.1, rates


def test_q6_no_summaries_are_longer(splits):
    _, rows = splits["test"]
    lengths = {
        label: statistics.mean(
            len(r["summary"].split()) for r in _rated(rows, 6) if r["question6"] == label
        )
        for label in ("Yes", "No")
    }
    assert lengths["No"] > 1.5 * lengths["Yes"], lengths


def test_q1_no_summaries_are_broken(splits, articles):
    """Truncated (no final stop), shuffled (lower-case start), letter-scrambled or
    code-switched (words the language's good text never has)."""
    _, train_rows = splits["train"]
    known = {lang: set() for lang in LANG_OF.values()}
    for r in train_rows:
        if r["question1"] == "Yes":
            lang = LANG_OF[r["worker_lang"]]
            known[lang] |= set(_words(articles[r["gem_id"]])) | set(_words(r["summary"]))

    def broken(r):
        text = r["summary"]
        unknown = [w for w in _words(text) if w not in known[LANG_OF[r["worker_lang"]]]]
        starts_well = text[0].isupper() or text[0].isdigit()
        return not text.endswith(".") or not starts_well or len(unknown) >= 2

    _, rows = splits["test"]
    rates = _rate_by_label(rows, 1, broken)
    assert rates["No"] > 0.8 and rates["Yes"] < 0.1, rates


def _words(text):
    return [w for w in re.findall(r"\w+", text.lower()) if not w.isdigit()]


def test_q3_no_summaries_contain_word_pairs_good_text_never_has(splits, articles):
    """Word bigrams (entities masked) that no Q3-Yes training summary and no article has."""

    def masked_bigrams(text, lang):
        for kind, value in sorted(_entities(lang, text), reverse=True):
            if kind != "num":
                text = text.replace(value, kind.upper())
        words = [
            "NUM" if re.fullmatch(r"[\d.,]+", w) else w.lower()
            for w in re.findall(r"[\w'%]+|[.,;]", text)
        ]
        return set(zip(words, words[1:]))

    _, train_rows = splits["train"]
    good = set()
    article_langs = {}
    for r in train_rows:
        lang = LANG_OF[r["worker_lang"]]
        article_langs[r["gem_id"]] = lang
        if r["question3"] == "Yes":
            good |= masked_bigrams(r["summary"], lang)
    for gem_id, lang in sorted(article_langs.items()):
        good |= masked_bigrams(articles[gem_id], lang)
    _, rows = splits["test"]
    rates = _rate_by_label(
        rows, 3, lambda r: bool(masked_bigrams(r["summary"], LANG_OF[r["worker_lang"]]) - good)
    )
    assert rates["No"] > 0.8 and rates["No"] > 3 * rates["Yes"], rates


def test_rouge_l_baseline_does_not_solve_the_sample(splits, articles, vocab):
    """ROUGE-L(article, summary) on SentencePiece pieces: the bar a learnt metric must
    beat. Overlap alone must not give Q2-Q6 away."""
    from rouge_score import rouge_scorer
    from sklearn.metrics import roc_auc_score

    class Pieces:
        def tokenize(self, text):
            return vocab.encode(text, out_type=str)

    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=Pieces())
    _, rows = splits["test"]
    score = {
        id(r): scorer.score(articles[r["gem_id"]], r["summary"])["rougeL"].fmeasure for r in rows
    }
    aucs = {}
    for q in range(1, 7):
        rated = _rated(rows, q)
        aucs[q] = roc_auc_score(
            [r[f"question{q}"] == "Yes" for r in rated], [score[id(r)] for r in rated]
        )
    assert all(0.3 < aucs[q] < 0.7 for q in (2, 3, 4, 5, 6)), aucs
    assert aucs[1] < 0.8, aucs
