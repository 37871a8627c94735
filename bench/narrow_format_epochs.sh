#!/usr/bin/env bash
# One training epoch per accumulation format, two builds alternated (issue 21: "a training epoch
# in bf16/fp16/fp8 within 3x of the same profile in fp32"): for each model, profile and format,
# `fplab train ... --epochs 1 --quiet --json` three times with each binary, the best epoch seconds
# and the weights' SHA-256 (the same on both sides where a change keeps the bits).
#
#   bench/narrow_format_epochs.sh BEFORE_FPLAB AFTER_FPLAB [TRAIN_SUBSET]
#   bench/narrow_format_epochs.sh /tmp/main-build/apps/fplab build/apps/fplab 512
set -euo pipefail
if [[ $# -lt 2 || ! -x $1 || ! -x $2 ]]; then
  echo "usage: $0 BEFORE_FPLAB AFTER_FPLAB [TRAIN_SUBSET] (two fplab binaries)" >&2
  exit 2
fi
before=$1 after=$2 subset=${3:-512}
best_of_three() {  # binary model profile format -> "SECONDS SHA"
  local best="" sha="" out seconds
  for _ in 1 2 3; do
    out=$("$1" train --model "$2" --profile "$3" --format "$4" --train-subset "$subset" --epochs 1 --quiet --json)
    read -r seconds sha < <(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["history"][0]["seconds"], d["weights_sha256"][:12])' <<< "$out")
    if [[ -z $best ]] || python3 -c "import sys; sys.exit(not $seconds < $best)"; then best=$seconds; fi
  done
  echo "$best $sha"
}
echo "| model | profile | format | before s | after s | weights before | weights after |"
echo "|---|---|---|---|---|---|---|"
for model in mlp small_cnn; do
  for profile in v100 h100; do
    for format in fp32 bf16 fp16 e4m3 e5m2; do
      read -r b bsha < <(best_of_three "$before" $model $profile $format)
      read -r a asha < <(best_of_three "$after" $model $profile $format)
      echo "| $model | $profile | $format | $b | $a | $bsha | $asha |"
    done
  done
done
