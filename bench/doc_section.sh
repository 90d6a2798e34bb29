#!/usr/bin/env bash
# Replaces the generated section of a markdown file with stdin:
# everything between the lines "<!-- NAME:begin -->" and "<!-- NAME:end -->"
# (kept). Without the markers the section is appended at the end, markers
# included, so the next run replaces it.
#
#   bash bench/doc_section.sh FILE NAME < CONTENT
set -euo pipefail
file=${1:?usage: doc_section.sh FILE NAME < CONTENT}
name=${2:?usage: doc_section.sh FILE NAME < CONTENT}
begin="<!-- $name:begin -->" end="<!-- $name:end -->"
content=$(mktemp) next=$(mktemp)
trap 'rm -f "$content" "$next"' EXIT
cat >"$content"
if grep -qxF "$begin" "$file" && grep -qxF "$end" "$file"; then
  awk -v b="$begin" -v e="$end" -v c="$content" '
    $0 == b { print; while ((getline l < c) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$file" >"$next"
else
  { cat "$file"; echo; echo "$begin"; cat "$content"; echo "$end"; } >"$next"
fi
cat "$next" >"$file"
