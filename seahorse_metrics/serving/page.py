"""`GET /`: a self-contained page to try the metrics by hand.

The page first lists the metrics the server has loaded (from `/healthz`,
polled while they load): each with the SEAHORSE question it answers and
what a "yes" to it means (`records.QUESTION_MEANINGS`, for the metrics
whose name or path says `qN`), and its decision threshold. Paste an article
and a summary (and, for a query-focused summary, the question it answers),
press Score: the page sends two requests to `/v1/score` on the same server
(the summary whole, with the server's settings, and sentence by sentence)
and shows each metric's score, its decision at the server's threshold
(when `serve` was given one), and the summary with each sentence shaded by
its score (red 0 ... green 1). No script, style or font comes from the
network; a bearer token, when the server needs one, is typed into the page.
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seahorse-metrics</title>
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem;
       color: #1d1d1f; }
label { display: block; margin: .6rem 0 .2rem; font-weight: 600; }
textarea, input { width: 100%; box-sizing: border-box; font: inherit; padding: .4rem; }
textarea#article { height: 11rem; } textarea#summary { height: 5rem; }
button { margin-top: .8rem; font: inherit; padding: .4rem 1.4rem; }
#status { margin: .8rem 0; color: #555; } #status.error { color: #b00020; }
.metric { border: 1px solid #ddd; border-radius: 6px; padding: .6rem 1rem; margin: .8rem 0; }
.metric h2 { font-size: 1.05rem; margin: 0 0 .4rem; }
.score { font-size: 1.4rem; font-variant-numeric: tabular-nums; margin-right: 1rem; }
.decision { padding: .1rem .5rem; border-radius: 4px; }
.decision[data-decision="yes"] { background: #d7f5dd; }
.decision[data-decision="no"] { background: #fadcdc; }
.sentences { line-height: 1.9; margin-top: .6rem; }
.sentence { padding: .15rem .2rem; border-radius: 3px; margin-right: .15rem; }
.note { color: #666; font-size: .9rem; }
#metrics dt { font-weight: 600; margin-top: .4rem; } #metrics dd { margin-left: 1.2rem; }
</style>
</head>
<body>
<h1>seahorse-metrics</h1>
<p class="note">Scores are P("1") at the first decoder step of each metric, as
<code>seahorse-metrics score</code> writes them: the metric's probability that the answer to
its question is yes. Sentences are shaded by their own score (red 0, green 1).</p>
<section id="metrics" aria-live="polite"><p class="note">Asking the server which metrics it
has loaded…</p></section>
<form id="form">
  <label for="article">Article</label><textarea id="article" required></textarea>
  <label for="summary">Summary</label><textarea id="summary" required></textarea>
  <label for="question">The question the summary answers (query-focused summaries only, e.g.
  SQuALITY's; leave empty for a generic summary)</label>
  <input id="question" type="text">
  <label for="token">Bearer token (if the server needs one)</label>
  <input id="token" type="password" autocomplete="off">
  <button id="score" type="submit">Score</button>
</form>
<div id="status" role="status"></div>
<section id="results"></section>
<script>
"use strict";
const $ = (id) => document.getElementById(id);

function shade(score) {
  const hue = Math.round(Math.max(0, Math.min(1, score)) * 120);
  return `hsl(${hue}, 70%, 82%)`;
}

async function post(body) {
  const headers = {"Content-Type": "application/json"};
  const token = $("token").value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch("v1/score", {method: "POST", headers, body: JSON.stringify(body)});
  const data = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(`${response.status}: ${data.error || response.statusText}`);
  return data;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function metricBlock(name, whole, thresholds, sentences) {
  const block = element("div", "metric");
  block.dataset.metric = name;
  block.appendChild(element("h2", "", name));
  const score = element("span", "score", whole[name].toFixed(4));
  score.dataset.score = whole[name];
  block.appendChild(score);
  if (name in thresholds) {
    const decision = whole[name + "_decision"];
    const badge = element("span", "decision", `${decision} at threshold ${thresholds[name]}`);
    badge.dataset.decision = decision;
    block.appendChild(badge);
  }
  if (whole.truncated) block.appendChild(element("p", "note", "The input was truncated to the " +
                                                 "server's max_input_length."));
  const shaded = element("p", "sentences");
  sentences.sentences.forEach((text, index) => {
    const value = sentences[name + "_sentences"][index];
    const span = element("span", "sentence", text);
    span.dataset.score = value;
    span.title = `${name}: ${value.toFixed(4)}`;
    span.style.backgroundColor = shade(value);
    shaded.appendChild(span);
    shaded.appendChild(document.createTextNode(" "));
  });
  block.appendChild(shaded);
  return block;
}

function describe(name, health) {
  const about = (health.questions || {})[name];
  let text = about
    ? `SEAHORSE Q${about.question} (${about.name.replace("_", " ")}): a yes means ${about.meaning}.`
    : 'Its name and path name no SEAHORSE question (q1-q6): the score is P("1") for ' +
      "whatever it was trained to answer.";
  if (name in (health.thresholds || {})) {
    text += ` Decision: yes at a score of ${health.thresholds[name]} or more.`;
  }
  return text;
}

async function listMetrics() {
  const section = $("metrics");
  let health;
  try {
    const response = await fetch("healthz");
    health = await response.json();
  } catch (error) {
    health = {status: "unreachable"};
  }
  if (health.status === "loading") {
    section.replaceChildren(element("p", "note", "The metrics are loading…"));
    setTimeout(listMetrics, 2000);
    return;
  }
  if (health.status !== "ready") {
    section.replaceChildren(element("p", "note", `The metrics are not available (${
      health.error || health.status}).`));
    return;
  }
  const list = element("dl");
  for (const name of health.metrics) {
    const term = element("dt", "", name);
    term.dataset.metric = name;
    list.append(term, element("dd", "", describe(name, health)));
  }
  section.replaceChildren(element("h2", "", "Loaded metrics"), list);
  section.dataset.state = "listed";
}

listMetrics();

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const pair = {article: $("article").value, summary: $("summary").value};
  if ($("question").value.trim()) pair.question = $("question").value;
  $("status").className = "";
  $("status").textContent = "Scoring…";
  $("results").replaceChildren();
  try {
    const [whole, split] = await Promise.all([
      post({pairs: [pair]}), post({pairs: [pair], per_sentence: true})]);
    const row = whole.results[0], rowSplit = split.results[0];
    if (row.error) throw new Error(row.error);
    for (const name of whole.metrics) {
      $("results").appendChild(metricBlock(name, row, whole.thresholds, rowSplit));
    }
    $("status").textContent = "Done.";
    document.body.dataset.state = "done";
  } catch (error) {
    $("status").className = "error";
    $("status").textContent = String(error.message || error);
    document.body.dataset.state = "error";
  }
});
</script>
</body>
</html>
"""
