"""A Python client of `seahorse-metrics serve`, shaped like the in-process scorer.

    from seahorse_metrics import RemoteScorer
    scorer = RemoteScorer("http://127.0.0.1:8080")      # instead of Scorer.load(...)
    probs = scorer.score(articles, summaries)           # float32 numpy array, input order

`RemoteScorer.score` has `Scorer.score`'s signature and returns the same
float32 numbers (the server sends the float32 values `score` writes), so
code written for the in-process scorer runs against a server unchanged;
`score_all` is `MultiScorer.score` (every metric). Only the standard
library is used: no server packages are needed on the client's side.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any, Optional, Sequence

import numpy as np

from seahorse_metrics.scoring.records import check_pairs  # no JAX: the client stays light

TOKEN_ENV = "SEAHORSE_METRICS_TOKEN"


class RemoteScoringError(RuntimeError):
    """The server refused or failed a request.

    Attributes:
      status: The HTTP status (0 when the server could not be reached).
      body: The decoded JSON answer (or {"error": text}).
    """

    def __init__(self, status: int, body: dict):
        super().__init__(f"HTTP {status}: {body.get('error', body)}")
        self.status = status
        self.body = body


class RemoteScorer:
    """Scores (premise, hypothesis) pairs with the metrics a server serves.

    Attributes:
      url: The server's base URL.
      metric: The metric `score` returns (default: the server's only one).
    """

    def __init__(
        self,
        url: str,
        metric: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 300.0,
        retries: int = 5,
    ):
        """A client of one server; nothing is sent until the first call.

        Args:
          url: The server, e.g. `http://127.0.0.1:8080`.
          metric: The metric of `score` (needed when the server has several).
          token: Bearer token (default: `SEAHORSE_METRICS_TOKEN`, else none).
          timeout: Seconds to wait for one answer.
          retries: Times a 503 (loading, overloaded) is retried after its
            `Retry-After`.
        """
        self.url = url.rstrip("/")
        self.metric = metric
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout = float(timeout)
        self.retries = int(retries)
        self._health: Optional[dict] = None

    # ------------------------------------------------------------ transport
    def _call(
        self, method: str, path: str, body: Optional[dict] = None, retry: bool = True
    ) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url + path, data, headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                answer = _decoded(error.read())
                if error.code != 503 or attempt == self.retries or not retry:
                    raise RemoteScoringError(error.code, answer) from None
                time.sleep(float(error.headers.get("Retry-After") or 1))
            except urllib.error.URLError as error:
                raise RemoteScoringError(0, {"error": f"{self.url}: {error.reason}"}) from None
        raise AssertionError("unreachable")

    def health(self, wait: bool = False) -> dict:
        """`GET /healthz`; with `wait`, polls (up to `timeout`) while the
        server is loading.

        Raises:
          RemoteScoringError: when the server is not ready.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._health = self._call("GET", "/healthz", retry=False)
                return self._health
            except RemoteScoringError as error:
                loading = error.status == 503 and error.body.get("status") == "loading"
                if not (wait and loading) or time.monotonic() > deadline:
                    raise
            time.sleep(0.25)

    def request(self, pairs: Sequence[dict], **options: Any) -> dict:
        """One `POST /v1/score` with `pairs` and options (`metrics`,
        `long_inputs`, `per_sentence`); returns the decoded answer."""
        return self._call("POST", "/v1/score", {"pairs": list(pairs), **options})

    # ------------------------------------------------------------ scoring
    @property
    def metrics(self) -> list[str]:
        """The metrics the server scores."""
        if self._health is None:
            self.health(wait=True)
        return list(self._health["metrics"])

    def score_all(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        batch_size: Optional[int] = None,
        show_progress: Optional[bool] = None,
        *,
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> dict[str, np.ndarray]:
        """`MultiScorer.score` on the server: {metric: float32 [n] scores}.

        Args:
          premises, hypotheses: The pairs.
          batch_size: Pairs per request (default: the server's most).
          show_progress: Show a progress bar (default: when on a terminal).
          questions: The question of each query-focused summary (None entries
            for generic ones).

        Raises:
          ValueError: for lists of different lengths, non-strings, or a pair
            the server could not score (its `error`).
          RemoteScoringError: when the server refuses a request.
        """
        from tqdm.auto import tqdm

        questions = check_pairs(premises, hypotheses, questions)
        per_request = int(batch_size or self.health(wait=True)["max_request_pairs"])
        scores = {name: np.zeros(len(premises), np.float32) for name in self.metrics}
        # The server reads a request's pairs all with a question or all without.
        groups = [
            [i for i, q in enumerate(questions) if (q is None) == generic]
            for generic in (True, False)
        ]
        with tqdm(
            total=len(premises),
            desc="scoring",
            unit="ex",
            dynamic_ncols=True,
            disable=(None if show_progress is None else not show_progress),
        ) as progress:
            for group in groups:
                for start in range(0, len(group), per_request):
                    chunk = group[start : start + per_request]
                    self._score_chunk(chunk, premises, hypotheses, questions, scores)
                    progress.update(len(chunk))
        return scores

    def _score_chunk(self, chunk: list[int], premises, hypotheses, questions, scores) -> None:
        pairs = [{"article": premises[i], "summary": hypotheses[i]} for i in chunk]
        for pair, i in zip(pairs, chunk):
            if questions[i] is not None:
                pair["question"] = questions[i]
        answer = self.request(pairs)
        for i, row in zip(chunk, answer["results"]):
            if "error" in row:
                raise ValueError(f"pair {i}: {row['error']}")
            for name in scores:
                scores[name][i] = row[name]

    def score(
        self,
        premises: Sequence[str],
        hypotheses: Sequence[str],
        batch_size: Optional[int] = None,
        show_progress: Optional[bool] = None,
        *,
        questions: Optional[Sequence[Optional[str]]] = None,
    ) -> np.ndarray:
        """`Scorer.score` on the server: float32 [n] scores of `self.metric`.

        The arguments are `score_all`'s.

        Raises:
          ValueError: as `score_all`, or when the server has several metrics
            and none was chosen.
        """
        metric = self.metric
        if metric is None:
            if len(self.metrics) != 1:
                raise ValueError(
                    f"the server scores {self.metrics}; choose one with "
                    "RemoteScorer(url, metric=...) or use score_all"
                )
            metric = self.metrics[0]
        return self.score_all(premises, hypotheses, batch_size, show_progress, questions=questions)[
            metric
        ]


def _decoded(raw: bytes) -> dict:
    try:
        answer = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"error": raw.decode("utf-8", "replace")[:500]}
    return answer if isinstance(answer, dict) else {"error": answer}
