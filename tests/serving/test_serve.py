"""`seahorse-metrics serve` through real uvicorn processes on free loopback ports.

Three servers: `served` (two metrics, decisions, small limits) answers the
API, load, client and limit tests; `slow_windows` (one metric, a bearer
token, two XLA:CPU devices, windows that stay open 1.5 s and a queue of 64
pairs) makes overload
and shutdown with requests in flight deterministic; a third listens on
0.0.0.0 without a token. Every score is checked against the rows `score`
writes for the same pairs in this process.
"""

import concurrent.futures
import json
import re
import signal
import socket
import sys
import time

import numpy as np
import pytest

from fixtures import scoring_reference, tiny_model
from fixtures.serve_process import SHAPE_ARGS, ServerProcess, call

THRESHOLD = 0.00085
TOKEN = "s3cret-token"


def _pairs():
    """Pairs of every kind: short and long (truncated) articles, several
    sentences, a blank summary (a bad row)."""
    premises, hypotheses = scoring_reference.random_pairs(30, seed=7, max_words=160)
    hypotheses[3] = "The fox jumps. It is brown! Then it sleeps."
    premises[5] = " ".join(premises[:6])  # longer than 128 tokens: truncated or chunked
    hypotheses[9] = "   "
    return [
        {"article": p, "summary": h, "id": f"p{i}"}
        for i, (p, h) in enumerate(zip(premises, hypotheses))
    ]


PAIRS = _pairs()


@pytest.fixture(scope="module")
def metric_dirs(tiny_hf_dir, tiny_vocab_path, tmp_path_factory):
    second = tiny_model.save_hf_model(
        tiny_model.build_hf_model(seed=3),
        str(tmp_path_factory.mktemp("q6")),
        vocab_path=tiny_vocab_path,
    )
    return {"q4": tiny_hf_dir, "q6": second}


def _checkpoint_args(metric_dirs, names=("q4", "q6")):
    return [arg for name in names for arg in ("--checkpoint", f"{name}={metric_dirs[name]}")]


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory):
    """Platt maps for q4 and q6, as `evaluate --calibrate_on` writes them."""
    from seahorse_metrics.calibration.maps import CalibrationMap, CalibrationSet

    maps = {
        "q4": CalibrationMap("platt", {"slope": 0.5, "intercept": 2.0}, 40),
        "q6": CalibrationMap("platt", {"slope": 0.8, "intercept": 1.0}, 40),
    }
    path = tmp_path_factory.mktemp("calibration") / "calibration.json"
    path.write_text(json.dumps(CalibrationSet("platt", {}, maps).to_dict()), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def servers(metric_dirs, calibration_file, tmp_path_factory):
    """Starts both servers at once (they load and compile side by side)."""
    folder = tmp_path_factory.mktemp("servers")
    token_file = folder / "token"
    token_file.write_text(TOKEN + "\n")
    served = ServerProcess(
        _checkpoint_args(metric_dirs)
        + SHAPE_ARGS
        + [
            "--threshold",
            str(THRESHOLD),
            "--max_request_pairs",
            "16",
            "--max_body_bytes",
            "40000",
            "--max_wait_ms",
            "20",
            "--calibration",
            calibration_file,
        ],
        str(folder / "served.log"),
    )
    slow = ServerProcess(
        _checkpoint_args(metric_dirs, ["q4"])
        + SHAPE_ARGS
        + [
            "--token_file",
            str(token_file),
            "--max_wait_ms",
            "1500",
            "--max_batch_pairs",
            "1000",
            "--max_queue",
            "64",
            "--max_request_pairs",
            "16",
            "--cpu_devices",
            "2",
            "--header_timeout_s",
            "1",
            "--body_timeout_s",
            "1",
            "--max_connections",
            "20",
        ],
        str(folder / "slow.log"),
        env={"XLA_FLAGS": None},
    )
    try:
        health = served.wait_ready()
        yield {"served": served, "slow": slow, "health": health, "slow_health": slow.wait_ready()}
    finally:
        for server in (served, slow):
            server.kill()
    for server in (served, slow):
        assert "Traceback" not in server.log(), server.log()[-3000:]


@pytest.fixture(scope="module")
def served(servers):
    return servers["served"]


def _score_rows(metric_dirs, tmp_path_factory, extra_args, names=("q4", "q6")):
    """The rows `seahorse-metrics score` writes for PAIRS, by id."""
    from seahorse_metrics.cli import main as cli_main

    folder = tmp_path_factory.mktemp("score")
    source, output = folder / "pairs.jsonl", folder / "scores.jsonl"
    source.write_text("".join(json.dumps(pair) + "\n" for pair in PAIRS), encoding="utf-8")
    assert (
        cli_main(
            [
                "score",
                *_checkpoint_args(metric_dirs, names),
                "--input",
                str(source),
                "--output",
                str(output),
                "--no_progress",
                *SHAPE_ARGS,
                *extra_args,
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    meta = json.loads((folder / "scores.jsonl.meta.json").read_text(encoding="utf-8"))
    return {row["id"]: row for row in rows}, meta


@pytest.fixture(scope="module")
def reference(metric_dirs, calibration_file, tmp_path_factory):
    return _score_rows(
        metric_dirs,
        tmp_path_factory,
        ["--threshold", str(THRESHOLD), "--calibration", calibration_file],
    )


def _post(server, pairs, headers=None, **options):
    return call(server.url + "/v1/score", {"pairs": pairs, **options}, headers=headers)


# A pair's batch companions and row differ between a file run and a merged
# window, and XLA's float32 products are not bit-identical across rows: the
# scores agree to float32 rounding (observed: relative 1e-6).
RTOL = 1e-5


def _assert_rows_match(rows, pairs, reference_rows, fields):
    assert [row.get("id") for row in rows] == [pair["id"] for pair in pairs]
    for row in rows:
        expected = reference_rows[row["id"]]
        for field in fields:
            value, wanted = row.get(field), expected.get(field)
            if isinstance(wanted, float) or (
                isinstance(wanted, list) and wanted and isinstance(wanted[0], float)
            ):
                np.testing.assert_allclose(value, wanted, rtol=RTOL, err_msg=f"{row['id']} {field}")
            elif field.endswith("_decision"):  # consistent with the row's own score
                assert (value is None) == (wanted is None), (row["id"], field)
                if value is not None:
                    score = row[field[: -len("_decision")]]
                    assert value == ("yes" if score >= THRESHOLD else "no"), (row["id"], field)
            else:
                assert value == wanted, (row["id"], field)


def test_healthz_is_503_while_loading_then_ready_with_the_metrics(servers):
    first, last = servers["health"][0], servers["health"][-1]
    assert first["code"] == 503 and first["status"] == "loading"
    assert last["code"] == 200 and last["status"] == "ready"
    assert last["metrics"] == ["q4", "q6"] and last["thresholds"] == {
        "q4": THRESHOLD,
        "q6": THRESHOLD,
    }
    assert last["max_request_pairs"] == 16
    assert last["engine"] == "jax" and last["data_parallel"] == 1
    # What each metric's question means, for the page (issue 48 point 23).
    assert last["questions"] == {
        "q4": {
            "question": 4,
            "name": "attribution",
            "meaning": "all the information in the summary is fully attributable to the article",
        },
        "q6": {
            "question": 6,
            "name": "conciseness",
            "meaning": "the summary concisely represents the information in the article",
        },
    }
    # `serve --cpu_devices 2`: each window's batch split over two XLA:CPU devices (the
    # overload and SIGTERM tests check its scores against `score` on one device).
    assert servers["slow_health"][-1]["data_parallel"] == 2


def test_responses_hold_the_rows_score_writes(served, reference):
    rows_by_id, meta = reference
    results = []
    for start in range(0, len(PAIRS), 16):
        status, body, _ = _post(served, PAIRS[start : start + 16])
        assert status == 200, body
        results.extend(body["results"])
    _assert_rows_match(
        results,
        PAIRS,
        rows_by_id,
        ["q4", "q6", "q4_decision", "q6_decision", "q4_calibrated", "q6_calibrated", "error"],
    )
    assert all(row["q4_calibrated"] > row["q4"] for row in results if "q4" in row)
    assert results[9] == {"id": "p9", "error": "field 'summary' is empty"}
    assert {row["q4_decision"] for row in results if "q4" in row} == {"yes", "no"}
    assert sum(row.get("truncated", False) for row in results) == meta["rows"]["truncated"] > 0


def test_per_sentence_and_chunk_modes_match_score(served, metric_dirs, tmp_path_factory, reference):
    rows_by_id, meta = _score_rows(
        metric_dirs, tmp_path_factory, ["--per_sentence", "--long_inputs", "chunk"], ["q4", "q6"]
    )
    pairs = PAIRS[:10]
    status, body, _ = _post(
        served, pairs, per_sentence=True, long_inputs="chunk", metrics=["q6", "q4"]
    )
    assert status == 200, body
    assert body["metrics"] == ["q4", "q6"] and body["per_sentence"] is True
    _assert_rows_match(
        body["results"],
        pairs,
        rows_by_id,
        ["q4", "q6", "q4_sentences", "q6_sentences", "sentences", "error"],
    )
    assert body["results"][3]["sentences"] == ["The fox jumps.", "It is brown!", "Then it sleeps."]
    assert body["results"][5]["chunked"] and body["chunked"] == sum(
        row.get("chunked", False) for row in body["results"]
    )
    status, body, _ = _post(served, pairs[:2], metrics=["q6"])  # one metric: its own model
    assert list(body["results"][0]) == [
        "id",
        "q6",
        "q6_decision",
        "q6_calibrated",
        "truncated",
        "chunked",
    ]
    _assert_rows_match(body["results"], pairs[:2], reference[0], ["q6", "q6_decision"])


@pytest.mark.parametrize(
    "payload, field, pair",
    [
        ({"pairs": []}, "pairs", None),
        ({"pairs": "text"}, "pairs", None),
        (
            {"pairs": [{"article": "a", "summary": "b"}, {"article": "a", "summary": 5}]},
            "pairs[1].summary",
            1,
        ),
        ({"pairs": [{"article": "a", "sumary": "b"}]}, "pairs[0].sumary", 0),
        ({"pairs": [{"article": "a", "summary": "b"}, 7]}, "pairs[1]", 1),
        ({"pairs": [{"article": "a", "summary": "b"}], "metrics": ["q9"]}, "metrics", None),
        (
            {"pairs": [{"article": "a", "summary": "b"}], "per_sentence": "yes"},
            "per_sentence",
            None,
        ),
        ({"pairs": [{"article": "a", "summary": "b"}], "long_inputs": "all"}, "long_inputs", None),
        ({"pairs": [{"article": "a", "summary": "b"}], "batch": 3}, "batch", None),
    ],
)
def test_bad_requests_get_400_naming_the_field_and_pair(served, payload, field, pair):
    status, body, _ = call(served.url + "/v1/score", payload)
    assert status == 400 and body["field"] == field and body.get("pair") == pair, body
    assert body["error"].startswith(field + ": ")


@pytest.mark.parametrize(
    "id_text", ["NaN", "Infinity", "-Infinity", "1e400", "9" * 5000, '"a \\ud800 id"']
)
def test_an_id_the_response_cannot_hold_gets_400_naming_it(served, id_text):
    """Issue 48 point 6: these ids gave 500."""
    raw = (
        '{"pairs": [{"article": "a fox.", "summary": "a fox."}, '
        '{"article": "a", "summary": "b", "id": ' + id_text + "}]}"
    ).encode()
    status, body, _ = call(served.url + "/v1/score", raw=raw)
    assert status == 400 and body["field"] == "pairs[1].id" and body["pair"] == 1, body
    assert "string" in body["error"] and len(body["error"]) < 200, body


def test_a_lone_surrogate_is_its_pairs_error_and_others_in_the_window_are_scored(served, reference):
    """Issue 48 point 1: one client's lone surrogate failed the whole merged window (500s)."""
    rows_by_id, _ = reference
    good = [pair for pair in PAIRS if pair["id"] != "p9"]
    bad = (
        '{"pairs": [{"article": "a plant.", "summary": "A plant \\ud800 here.", "id": "x"}, '
        + json.dumps(good[0])
        + "]}"
    ).encode()
    requests = [("bad", bad)] + [
        ("good", [good[(3 * n + i) % len(good)] for i in range(3)]) for n in range(8)
    ]

    def send(request):
        kind, payload = request
        if kind == "bad":
            return call(served.url + "/v1/score", raw=payload)
        return _post(served, payload)

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(send, requests))
    for (kind, payload), (status, body, _) in zip(requests, answers):
        assert status == 200, body
        if kind == "good":
            _assert_rows_match(body["results"], payload, rows_by_id, ["q4", "q6", "error"])
    bad_rows = answers[0][1]["results"]
    assert "lone surrogate U+D800" in bad_rows[0]["error"] and bad_rows[0]["id"] == "x"
    _assert_rows_match(bad_rows[1:], good[:1], rows_by_id, ["q4", "q6"])


def test_limits_not_json_too_many_pairs_body_too_large(served):
    status, body, _ = call(served.url + "/v1/score", raw=b'{"pairs": [')
    assert status == 400 and body["field"] == "body" and "not JSON" in body["error"]
    status, body, _ = call(served.url + "/v1/score", raw=b"[" * 15_000 + b"]" * 15_000)
    assert status == 400 and body["field"] == "body", body
    status, body, _ = _post(served, [{"article": "a", "summary": "b"}] * 17)
    assert status == 413 and body["limit"] == 16 and "17 pairs" in body["error"]
    status, body, _ = _post(served, [{"article": "a" * 50_000, "summary": "b"}])
    assert status == 413 and body["field"] == "body" and "--max_body_bytes" in body["error"]
    status, body, _ = call(served.url + "/v1/score")  # GET
    assert status == 405


def test_concurrent_requests_get_their_own_scores_in_merged_windows(served, reference):
    rows_by_id, _ = reference
    rng = np.random.default_rng(0)
    requests = []
    for _ in range(72):
        chosen = rng.choice(len(PAIRS), size=int(rng.integers(1, 7)), replace=False)
        requests.append([PAIRS[i] for i in chosen])
    deadline = time.monotonic() + 120
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(lambda pairs: _post(served, pairs), requests))
    assert time.monotonic() < deadline
    for pairs, (status, body, _) in zip(requests, answers):
        assert status == 200, body
        _assert_rows_match(body["results"], pairs, rows_by_id, ["q4", "q6", "error"])
    text = _metrics_text(served)
    windows = _metric(text, "seahorse_window_requests_count")
    merged = _metric(text, "seahorse_window_requests_sum")
    assert merged >= 72 and windows < merged, "no window merged two requests"
    assert _metric(text, 'seahorse_requests_total{code="400",endpoint="/v1/score"}') >= 9
    assert _metric(text, "seahorse_pair_errors_total") >= 1
    assert "seahorse_request_seconds_bucket" in text and "seahorse_queue_pairs" in text


def _metrics_text(server, headers=None):
    import urllib.request

    request = urllib.request.Request(server.url + "/metrics", headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def _metric(text, name):
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def test_client_has_the_scorer_signature_and_numbers(served, reference, metric_dirs):
    from seahorse_metrics import MultiScorer, RemoteScorer

    rows_by_id, _ = reference
    good = [pair for pair in PAIRS if pair["id"] != "p9"]
    premises, hypotheses = [p["article"] for p in good], [p["summary"] for p in good]
    remote = RemoteScorer(served.url, metric="q4")
    scores = remote.score(premises, hypotheses, show_progress=False)
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [rows_by_id[p["id"]]["q4"] for p in good], rtol=RTOL)
    both = RemoteScorer(served.url).score_all(premises, hypotheses, batch_size=5)
    np.testing.assert_allclose(both["q6"], [rows_by_id[p["id"]]["q6"] for p in good], rtol=RTOL)
    with pytest.raises(ValueError, match="choose one"):
        RemoteScorer(served.url).score(premises[:1], hypotheses[:1])
    with pytest.raises(ValueError, match="pair 1: field 'summary' is empty"):
        remote.score(premises[:2], [hypotheses[0], " "])
    questions = ["How many jobs?", None, "Who?", None]
    multi = MultiScorer.load(metric_dirs, max_input_length=128, bucket_lengths=(128,), batch_size=8)
    expected = multi.score(premises[:4], hypotheses[:4], questions=questions)
    remote_questions = RemoteScorer(served.url).score_all(
        premises[:4], hypotheses[:4], questions=questions
    )
    for name in ("q4", "q6"):
        np.testing.assert_allclose(remote_questions[name], expected[name], rtol=RTOL)
    assert remote_questions["q4"][0] != remote.score(premises[:1], hypotheses[:1])[0]


def test_token_guards_scores_and_metrics_but_not_the_page_or_health(servers):
    slow = servers["slow"]
    pair = [{"article": "a fox.", "summary": "a fox."}]
    for headers in (None, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        status, body, answer_headers = _post(slow, pair, headers=headers)
        assert status == 401 and "bearer token" in body["error"]
        assert answer_headers.get("www-authenticate") == "Bearer"
        assert call(slow.url + "/metrics", headers=headers)[0] == 401
    assert call(slow.url + "/healthz")[0] == 200
    import urllib.request

    with urllib.request.urlopen(slow.url + "/", timeout=30) as response:
        assert response.status == 200 and b'<textarea id="article"' in response.read()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _post(slow, pair, headers=auth)[0] == 200
    assert "seahorse_pairs_total" in _metrics_text(slow, auth)


def test_overload_gives_503_with_retry_after_and_loses_nothing(servers, reference):
    """A queue of 64 pairs and windows open 1.5 s: of 12 requests of 8 pairs
    sent together, those beyond the queue get 503; all others are scored."""
    slow, (rows_by_id, _) = servers["slow"], reference
    auth = {"Authorization": f"Bearer {TOKEN}"}
    good = [pair for pair in PAIRS if pair["id"] != "p9"]
    requests = [[dict(good[(8 * n + i) % len(good)]) for i in range(8)] for n in range(12)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda pairs: _post(slow, pairs, headers=auth), requests))
    codes = [status for status, _, _ in answers]
    assert set(codes) <= {200, 503} and codes.count(503) >= 1 and codes.count(200) >= 4, codes
    refused = [n for n, code in enumerate(codes) if code == 503]
    for n in refused:
        assert answers[n][2]["retry-after"] == "1" and "overloaded" in answers[n][1]["error"]
    with concurrent.futures.ThreadPoolExecutor(len(refused)) as pool:  # retried: all scored
        retried = pool.map(lambda n: _post(slow, requests[n], headers=auth), refused)
        answers = dict(enumerate(answers)) | dict(zip(refused, retried))
    for n, pairs in enumerate(requests):
        status, body, _ = answers[n]
        assert status == 200, body
        _assert_rows_match(body["results"], pairs, rows_by_id, ["q4"])


def _read_until_closed(connection, timeout):
    connection.settimeout(timeout)
    data = b""
    while True:
        chunk = connection.recv(4096)
        if not chunk:
            return data
        data += chunk


def test_silent_and_slow_connections_do_not_lock_out_a_client_with_the_token(servers):
    """Issue 48 point 4: connections that send half a request and then
    nothing held the server's open files until no one could be served. With
    --max_connections 20 and 1 s to send headers and body: 60 silent ones
    and a slow body do not keep a client with the token from its scores, and
    each is answered and closed."""
    slow = servers["slow"]
    silent = []
    for _ in range(60):
        connection = socket.create_connection(("127.0.0.1", slow.port), timeout=10)
        connection.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")
        silent.append(connection)
    slow_body = socket.create_connection(("127.0.0.1", slow.port), timeout=10)
    slow_body.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n".encode()
        + b'Content-Length: 100\r\n\r\n{"pairs": '
    )
    start = time.monotonic()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, body, _ = _post(slow, [{"article": "a fox.", "summary": "a fox."}], headers=auth)
    assert status == 200 and "q4" in body["results"][0], body
    answers = [_read_until_closed(connection, 10) for connection in silent]
    assert time.monotonic() - start < 10
    assert all(answer.startswith((b"HTTP/1.1 408", b"HTTP/1.1 503")) for answer in answers), answers
    assert sum(answer.startswith(b"HTTP/1.1 503") for answer in answers) >= 40  # made room
    assert _read_until_closed(slow_body, 10).startswith(b"HTTP/1.1 408")
    for connection in silent + [slow_body]:
        connection.close()


def test_sigterm_answers_the_requests_in_flight_then_exits_0(servers, reference):
    slow, (rows_by_id, _) = servers["slow"], reference
    auth = {"Authorization": f"Bearer {TOKEN}"}
    good = [pair for pair in PAIRS if pair["id"] != "p9"]
    requests = [good[8 * n : 8 * n + 8] for n in range(3)]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(_post, slow, pairs, auth) for pairs in requests]
        deadline = time.monotonic() + 30
        while _metric(_metrics_text(slow, auth), "seahorse_queue_pairs") < 24:
            assert time.monotonic() < deadline, "the requests never queued"
            time.sleep(0.02)
        slow.process.send_signal(signal.SIGTERM)
        answers = [future.result(timeout=60) for future in futures]
    for pairs, (status, body, _) in zip(requests, answers):
        assert status == 200, body
        _assert_rows_match(body["results"], pairs, rows_by_id, ["q4"])
    # Signalled once above: a second SIGTERM could land after the graceful shutdown has
    # given the signal back its default action, and kill the exiting process.
    assert slow.stop(sig=None) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", slow.port), timeout=2).close()
    assert "scoring the 24 queued pairs first" in slow.log() or "stopped" in slow.log()


def test_beyond_loopback_without_a_token_refuses_everything(metric_dirs, tmp_path):
    server = ServerProcess(
        ["--host", "0.0.0.0", "--checkpoint", metric_dirs["q4"], *SHAPE_ARGS],
        str(tmp_path / "open.log"),
    )
    try:
        server.wait_listening()
        for path, body in (
            ("/", None),
            ("/healthz", None),
            ("/metrics", None),
            ("/nowhere", None),
            ("/v1/score", {"pairs": [{"article": "a", "summary": "b"}]}),
        ):
            status, answer, _ = call(server.url + path, body)
            assert status == 401 and "beyond loopback" in answer["error"], (path, answer)
        assert server.stop() == 0
    finally:
        server.kill()
    assert "every request will be refused with 401 and no metric is loaded" in server.log()
    assert "Reading" not in server.log()  # no checkpoint was read


def test_read_token_from_file_or_environment(tmp_path):
    from seahorse_metrics.serving.server import is_loopback, read_token

    (tmp_path / "token").write_text("abc\nignored\n")
    assert read_token(str(tmp_path / "token"), {}) == "abc"
    assert read_token(None, {"SEAHORSE_METRICS_TOKEN": " xyz "}) == "xyz"
    assert read_token(None, {}) is None
    with pytest.raises(ValueError, match="empty"):
        read_token(None, {"SEAHORSE_METRICS_TOKEN": ""})
    with pytest.raises(FileNotFoundError):
        read_token(str(tmp_path / "missing"), {})
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_serve_without_the_server_packages_says_how_to_install(monkeypatch, capsys):
    from seahorse_metrics.cli import main as cli_main

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert cli_main(["serve", "--checkpoint", "q4=nowhere"]) == 2
    assert "pip install -e '.[serve]'" in capsys.readouterr().err


# The page runs in a real headless Chromium, as report.html's browser does
# (.ci/run installs Debian's chromium and chromium-driver when they are missing).
_PAGE_JS = """
const probe = document.createElement('span');
return Array.from(document.querySelectorAll('.metric')).map(block => ({
  name: block.dataset.metric,
  score: Number(block.querySelector('.score').dataset.score),
  decision: block.querySelector('.decision') && block.querySelector('.decision').dataset.decision,
  sentences: Array.from(block.querySelectorAll('.sentence')).map(span => {
    probe.style.backgroundColor = shade(Number(span.dataset.score));
    return {text: span.textContent, score: Number(span.dataset.score),
            shaded: span.style.backgroundColor !== '' &&
                    span.style.backgroundColor === probe.style.backgroundColor};
  }),
}));
"""


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    assert binary and driver_path, (
        "the page test needs Debian's chromium and chromium-driver: apt-get install -y "
        "chromium chromium-driver (.ci/run installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_page_scores_and_shades_a_pasted_summary_in_chromium(served, chromium):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    pair = {
        "article": PAIRS[3]["article"],
        "summary": PAIRS[3]["summary"],
        "question": "What does the fox do?",
    }
    chromium.get(served.url + "/")
    # The loaded metrics, each with what its question means (issue 48 point 23).
    WebDriverWait(chromium, 60).until(
        lambda driver: driver.find_element(By.ID, "metrics").get_attribute("data-state")
    )
    listed = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#metrics dt')).map("
        "dt => [dt.textContent, dt.nextElementSibling.textContent]);"
    )
    assert [name for name, _ in listed] == ["q4", "q6"]
    assert listed[0][1] == (
        "SEAHORSE Q4 (attribution): a yes means all the information in the "
        f"summary is fully attributable to the article. Decision: yes at a "
        f"score of {THRESHOLD} or more."
    )
    assert listed[1][1].startswith("SEAHORSE Q6 (conciseness): a yes means the summary concisely")
    for field in ("article", "summary", "question"):
        chromium.find_element(By.ID, field).send_keys(pair[field])
    chromium.find_element(By.ID, "score").click()
    WebDriverWait(chromium, 60).until(
        lambda driver: driver.find_element(By.TAG_NAME, "body").get_attribute("data-state")
    )
    status = chromium.find_element(By.ID, "status").text
    assert chromium.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "done", status
    page = chromium.execute_script(_PAGE_JS)
    _, whole, _ = _post(served, [pair])
    _, split, _ = _post(served, [pair], per_sentence=True)
    assert [block["name"] for block in page] == ["q4", "q6"]
    for block in page:
        name = block["name"]
        np.testing.assert_allclose(block["score"], whole["results"][0][name], rtol=RTOL)
        assert block["decision"] == ("yes" if block["score"] >= THRESHOLD else "no")
        assert (
            [s["text"] for s in block["sentences"]]
            == split["results"][0]["sentences"]
            == ["The fox jumps.", "It is brown!", "Then it sleeps."]
        )
        np.testing.assert_allclose(
            [s["score"] for s in block["sentences"]],
            split["results"][0][f"{name}_sentences"],
            rtol=RTOL,
        )
        assert all(s["shaded"] for s in block["sentences"])
    assert chromium.execute_script("return [shade(0), shade(1)]") == [
        "hsl(0, 70%, 82%)",
        "hsl(120, 70%, 82%)",
    ]
    errors = [entry for entry in chromium.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_each_metric_is_described_by_the_seahorse_question_its_name_or_path_names():
    from seahorse_metrics.serving.service import metric_questions

    described = metric_questions(
        {
            "q4": "/models/any",
            "score": "runs/q6_small/best",
            "student": "google/seahorse-large-q2",
            "nli": "runs/true",
            "seq4": "runs/x",
            "q44": "runs/y",
        }
    )
    assert {name: about["question"] for name, about in described.items()} == {
        "q4": 4,
        "score": 6,
        "student": 2,
    }
    assert described["q4"] == {
        "question": 4,
        "name": "attribution",
        "meaning": ("all the information in the summary is fully attributable to the article"),
    }


def test_a_metric_that_cannot_load_stops_the_server_with_exit_2(tmp_path, capsys):
    from seahorse_metrics.cli import main as cli_main

    from fixtures.serve_process import free_port

    missing = tmp_path / "missing"
    assert cli_main(["serve", "--checkpoint", f"q4={missing}", "--port", str(free_port())]) == 2
    error = capsys.readouterr().err
    assert "error: the metrics could not be served: FileNotFoundError" in error
    assert str(missing) in error
