#!/bin/bash
# The README's quickstart commands, as written, timed: run from the root of a fresh clone, as root.
#   d=$(mktemp -d) && git clone -q . $d/mt && (cd $d/mt && bash bench/quickstart_readme.sh)
# Prints mt's output and translations on stdout, and on stderr the seconds of each part and in all.
# No pip cache is used (PIP_NO_CACHE_DIR), as on a new machine. TORCH_INDEX is the README's CPU index;
# TORCH_INDEX= (empty) takes torch from pip's configured index instead, where that one is unreachable.
set -e
export PIP_NO_CACHE_DIR=1
TORCH_INDEX=${TORCH_INDEX-https://download.pytorch.org/whl/cpu}
start=$(date +%s.%N)
apt-get update -qq && apt-get install -y -qq python3-venv trans-de-en libtcmalloc-minimal4 >/dev/null
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0 ${TORCH_INDEX:+--index-url $TORCH_INDEX}
.venv/bin/pip install -q -e .
installed=$(date +%s.%N)
.venv/bin/mt run recipes/quickstart.yaml
trained=$(date +%s.%N)
printf 'Ich habe keine Zeit.\nWo ist der Bahnhof?\nDas Wetter ist heute schön.\n' | .venv/bin/mt translate --exp experiments/quickstart
end=$(date +%s.%N)
echo "install $(echo "$installed - $start" | bc) s; mt run $(echo "$trained - $installed" | bc) s;" \
     "translate $(echo "$end - $trained" | bc) s; total $(echo "$end - $start" | bc) s" >&2
