#!/usr/bin/env bash
# MatchXML on tibkat_gnd_en at the paper's fine-tuning budget, for a machine with one GPU.
#
# Not the CPU profile of docs/matchxml.rst: every stage fine-tunes down to the labels
# (--max-matcher-size 0), on every training text (--steps 0, --epochs passes per stage;
# tibkat has 41k texts, so 2 epochs of batch 128 is ~650 steps per stage, the paper's
# Eurlex-4K budget of 480-620 steps), with 128-token inputs, lr 5e-5 (Table III) and bf16
# autocast (automatic on CUDA). The encoder is the bundled all-MiniLM-L6-v2 (the `models`
# extra; the GPU machine has no model hub); the static sentence embeddings come from the
# same pretrained MiniLM (MatchXMLClassifier's sentence_encoder="auto"; the paper uses
# Sentence-T5). The ranker runs on the CPU with --threads threads.
#
# Rows: TF-IDF + XR-Linear, [TF-IDF | sentence] + XR-Linear and MatchXML, all with the
# ranker XRLinearClassifier(relevance_weighted=True, negative_sampling="tfn+man", Cp=2).
# Results: benchmarks/results/matchxml_tibkat_gpu.{json,md}.
#
# Usage (from the repository root; the data folder via $SKXMC_DATA or ../shared/data):
#     bash benchmarks/gpu_profile.sh [SEEDS...]      # default seed 0; e.g. 0 1 2
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-.venv/bin/python}
SEEDS=("${@:-0}")
"$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device: this profile is for a GPU machine"
print("GPU:", torch.cuda.get_device_name(0), "bf16:", torch.cuda.is_bf16_supported())
PY
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || true
time "$PY" benchmarks/matchxml.py --datasets tibkat_gnd_en --device cuda --threads "$(nproc)" \
    --max-length 128 --sentence-max-length 128 --batch-size 128 \
    --steps 0 --epochs 2 --max-matcher-size 0 --learning-rate 5e-5 \
    --rows tfidf tfidf+sentence matchxml --seeds "${SEEDS[@]}" \
    --name matchxml_tibkat_gpu
