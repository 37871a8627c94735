#!/usr/bin/env bash
# One training epoch per accumulation format, two builds alternated (issue 21: "a training epoch
# in bf16/fp16/fp8 within 3x of the same profile in fp32"): for each model, profile and format,
# `fplab train ... --epochs 1 --quiet --json` REPEATS times (3) with each binary, alternated, the
# best epoch seconds and the weights' SHA-256 (the same on both sides where a change keeps the
# bits). MODELS (default "mlp small_cnn") and FORMATS narrow the table; DATA_DIR names another
# IDX data set than fplab's default (docs/data.md).
#
#   bench/narrow_format_epochs.sh BEFORE_FPLAB AFTER_FPLAB [TRAIN_SUBSET [REPEATS]]
#   bench/narrow_format_epochs.sh /tmp/main-build/apps/fplab build/apps/fplab 512
#   MODELS=mlp bench/narrow_format_epochs.sh /tmp/main-build/apps/fplab build/apps/fplab 512 8
set -euo pipefail
if [[ $# -lt 2 || ! -x $1 || ! -x $2 ]]; then
  echo "usage: $0 BEFORE_FPLAB AFTER_FPLAB [TRAIN_SUBSET [REPEATS]] (two fplab binaries)" >&2
  exit 2
fi
before=$1 after=$2 subset=${3:-512} repeats=${4:-3}
epoch() {  # binary model profile format -> "SECONDS SHA"
  local out
  out=$("$1" train --model "$2" --profile "$3" --format "$4" --train-subset "$subset" --epochs 1 --quiet --json \
    ${DATA_DIR:+--data-dir "$DATA_DIR"})
  python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["history"][0]["seconds"], d["weights_sha256"][:12])' <<< "$out"
}
less() { python3 -c "import sys; sys.exit(not $1 < $2)"; }
echo "| model | profile | format | before s | after s | weights before | weights after |"
echo "|---|---|---|---|---|---|---|"
for model in ${MODELS:-mlp small_cnn}; do
  for profile in v100 h100; do
    for format in ${FORMATS:-fp32 bf16 fp16 e4m3 e5m2}; do
      b="" a=""
      for ((i = 0; i < repeats; ++i)); do  # alternated, so that both see the same machine
        read -r seconds bsha < <(epoch "$before" "$model" "$profile" "$format")
        if [[ -z $b ]] || less "$seconds" "$b"; then b=$seconds; fi
        read -r seconds asha < <(epoch "$after" "$model" "$profile" "$format")
        if [[ -z $a ]] || less "$seconds" "$a"; then a=$seconds; fi
      done
      echo "| $model | $profile | $format | $b | $a | $bsha | $asha |"
    done
  done
done
