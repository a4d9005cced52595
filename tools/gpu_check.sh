#!/usr/bin/env bash
# Each trainable paper's quick preset on the CPU and on a device, claims checked on both, one line per paper:
#
#   tools/gpu_check.sh [--device cuda] [--seed 0] [--out DIR] [PAPER ...]
#
# Trainable papers: those whose module defines a torch.nn.Module (default: all of them; or name some). For each, runs
# `iclr25 reproduce PAPER --preset quick --check` with --device cpu and then with --device DEVICE (default cuda) and
# prints: time on the CPU, time on the device, whether the claims came out as declared on each, and every claim's
# measured value on both (H = headline, M = mechanism, S = sanity, in report order), with the largest relative
# difference. Reports and logs go to DIR/cpu and DIR/device (default: a new folder under /tmp). Exit status 1 when a run
# failed or a claim did not come out as declared on either device. PYTHON picks the interpreter (default python).
set -uo pipefail
cd "$(dirname "$0")/.."
device=cuda seed=0 out=""
papers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --device=*) device="${1#*=}"; shift ;;
    --seed) seed="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
    *) papers+=("$1"); shift ;;
  esac
done
PY=${PYTHON:-python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -n "$out" ] || out=$(mktemp -d /tmp/gpu_check.XXXXXX)
mkdir -p "$out"
if [ ${#papers[@]} -eq 0 ]; then
  mapfile -t papers < <("$PY" - <<'EOF'
import importlib, inspect, sys
import torch
from iclr25_nb.core import implemented_papers
for p in implemented_papers():
    try: m = importlib.import_module(p.module_name)
    except Exception as e: print(f'gpu_check: {p.name} not importable ({type(e).__name__}: {e}); skipped', file=sys.stderr); continue
    if any(inspect.isclass(v) and issubclass(v, torch.nn.Module) and v.__module__ == m.__name__ for v in vars(m).values()):
        print(p.name)
EOF
)
fi
name=$("$PY" -c "
import platform, sys, torch
d = sys.argv[1]
print(torch.cuda.get_device_name(0) if d.startswith('cuda') and torch.cuda.is_available() else platform.processor() or platform.machine(), 'torch', torch.__version__)" "$device")
echo "gpu_check: ${#papers[@]} paper(s), seed $seed, quick preset; device $device ($name); reports in $out"
status=0
for p in "${papers[@]}"; do
  rc_cpu=0; rc_dev=0
  "$PY" -m iclr25_nb.cli reproduce "$p" --preset quick --seed "$seed" --device cpu --out "$out/cpu" --check \
    >"$out/$p.cpu.log" 2>&1 || rc_cpu=$?
  "$PY" -m iclr25_nb.cli reproduce "$p" --preset quick --seed "$seed" --device "$device" --out "$out/device" --check \
    >"$out/$p.device.log" 2>&1 || rc_dev=$?
  [ "$rc_cpu" = 0 ] && [ "$rc_dev" = 0 ] || status=1
  "$PY" - "$out" "$p" "$device" "$rc_cpu" "$rc_dev" <<'EOF'
import json, math, sys
from pathlib import Path
out, paper, device, rc_cpu, rc_dev = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def load(where):
    f = Path(out) / where / paper / 'report.json'
    return json.loads(f.read_text()) if f.exists() else None
def state(r, rc):
    if r is None: return 'FAILED (see the log)'
    return f"{r['meta'].get('seconds', float('nan')):.1f} s, claims {'as declared' if rc == 0 else 'NOT as declared'}"
def claims(r):
    if r is None: return []
    n = {}
    out = []
    for c in r['claims']:
        k = (c.get('kind') or 'claim')[0].upper(); n[k] = n.get(k, 0) + 1
        out.append((f'{k}{n[k]}', c.get('measured')))
    return out
a, b = load('cpu'), load('device')
ca, cb = dict(claims(a)), dict(claims(b))
def num(x):
    try: return float(x)
    except (TypeError, ValueError): return None
def fmt(x): return '—' if x is None else (f'{x:.4g}' if isinstance(x, float) else str(x))
vals, worst = [], 0.0
for k in dict.fromkeys(list(ca) + list(cb)):
    x, y = num(ca.get(k)), num(cb.get(k))
    vals.append(f"{k} {fmt(x if x is not None else ca.get(k))} -> {fmt(y if y is not None else cb.get(k))}")
    if x is not None and y is not None and math.isfinite(x) and math.isfinite(y):
        worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-12))
print(f"{paper}: cpu {state(a, rc_cpu)}; {device} {state(b, rc_dev)}; claims cpu -> {device}: "
      + (', '.join(vals) or 'none') + (f'; max rel diff {worst:.2g}' if vals else ''), flush=True)
EOF
done
exit $status
