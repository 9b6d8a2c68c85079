"""The try-it page served at ``/``: plain HTML and a little JavaScript, no build step.

It asks ``GET /model`` what is served, sends the text to ``POST /predict`` and, when the
model explains itself, to ``POST /explain``, and draws the scores as bars.
"""

from __future__ import annotations

__all__ = ["PAGE_HTML"]

PAGE_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>skxmc model server</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto;
         padding: 0 1rem; color: #222; }
  textarea { width: 100%; min-height: 8rem; font: inherit; box-sizing: border-box; }
  .row { display: flex; gap: 1rem; align-items: center; margin: .5rem 0; }
  #model { color: #555; }
  #error { color: #b00020; white-space: pre-wrap; }
  table { border-collapse: collapse; width: 100%; margin-top: 1rem; }
  td { padding: .25rem .5rem; vertical-align: top; }
  td.label { font-family: ui-monospace, monospace; white-space: nowrap; }
  td.bar { width: 60%; }
  .bar > div { background: #4a78c2; height: 1rem; min-width: 1px; }
  td.score { font-family: ui-monospace, monospace; text-align: right; }
  .why { color: #555; font-size: .9em; }
  footer { margin-top: 2rem; color: #777; font-size: .9em; }
</style>
</head>
<body>
<h1>skxmc model server</h1>
<p id="model">loading the model description...</p>
<form id="form">
  <label for="text">Text</label>
  <textarea id="text" name="text" placeholder="Paste a text here"></textarea>
  <div class="row">
    <label for="k">labels (k)</label>
    <input id="k" name="k" type="number" min="1" value="5" style="width: 5rem">
    <button id="submit" type="submit">Predict</button>
  </div>
</form>
<p id="error" role="alert"></p>
<table id="results" aria-live="polite"></table>
<footer>API: <a href="/docs">/docs</a> (OpenAPI: <a href="/openapi.json">/openapi.json</a>),
<a href="/model">/model</a>, <a href="/health">/health</a>.</footer>
<script>
"use strict";
let canExplain = false;

function show(id, text) { document.getElementById(id).textContent = text; }

async function call(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: {"Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) { throw new Error(data.detail || response.statusText); }
  return data;
}

function why(item) {
  // XR-Linear: the terms that contribute most; KNN-BERT: the nearest training rows.
  if (item.features && item.features.length) {
    return "features: " + item.features.map(
      f => (f.name === null ? "#" + f.feature : f.name) + " " + f.contribution.toFixed(3)
    ).join(", ");
  }
  if (item.neighbors && item.neighbors.length) {
    return "nearest training rows: " + item.neighbors.map(
      n => n.training_row + " (" + n.similarity.toFixed(2) + ")").join(", ");
  }
  return "";
}

function render(prediction, explanation) {
  const table = document.getElementById("results");
  table.replaceChildren();
  const top = Math.max(...prediction.scores.map(Math.abs), 1e-12);
  prediction.labels.forEach((label, i) => {
    const score = prediction.scores[i];
    const row = table.insertRow();
    row.className = "result";
    const name = row.insertCell();
    name.className = "label";
    name.textContent = String(label);
    const bar = row.insertCell();
    bar.className = "bar";
    const fill = document.createElement("div");
    fill.style.width = (100 * Math.max(score, 0) / top).toFixed(1) + "%";
    bar.appendChild(fill);
    const text = explanation && explanation[i] ? why(explanation[i]) : "";
    if (text) {
      const note = document.createElement("div");
      note.className = "why";
      note.textContent = text;
      bar.appendChild(note);
    }
    const cell = row.insertCell();
    cell.className = "score";
    cell.textContent = score.toFixed(4);
  });
  if (!prediction.labels.length) { show("error", "no label reached"); }
}

document.getElementById("form").addEventListener("submit", async event => {
  event.preventDefault();
  show("error", "");
  const text = document.getElementById("text").value;
  const k = parseInt(document.getElementById("k").value, 10);
  try {
    const body = {text: text, k: k};
    const predicted = await call("/predict", body);
    let explanation = null;
    if (canExplain) {
      explanation = (await call("/explain", body)).explanations[0];
    }
    render(predicted.predictions[0], explanation);
  } catch (error) {
    document.getElementById("results").replaceChildren();
    show("error", error.message);
  }
});

call("/model").then(info => {
  canExplain = info.explain;
  document.getElementById("k").value = info.default_k;
  document.getElementById("k").max = info.n_labels;
  show("model", info.estimator + ", " + info.n_labels + " labels (skxmc " +
       info.skxmc_version + ")" + (canExplain ? "; with explanations" : ""));
}).catch(error => show("error", "GET /model failed: " + error.message));
</script>
</body>
</html>
"""
