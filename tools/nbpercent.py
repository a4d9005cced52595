"""Convert between nbdev notebooks and a plain-text "percent" form, for editing with text tools.

    python tools/nbpercent.py to-py nbs/10_deeptage.ipynb   > /tmp/deeptage.py
    python tools/nbpercent.py to-nb /tmp/deeptage.py nbs/10_deeptage.ipynb

Cells are separated by lines `# %%` (code) or `# %% [markdown]` (markdown; every line of a markdown
cell is prefixed by `# `). The notebook stays the source of truth; the text form is a working copy.
"""
import hashlib, json, sys
from pathlib import Path

CODE, MD = '# %%', '# %% [markdown]'


def to_py(nb_path):
    nb = json.loads(Path(nb_path).read_text())
    out = []
    for c in nb['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] == 'markdown':
            out.append(MD + '\n' + '\n'.join(('# ' + l) if l else '#' for l in src.split('\n')))
        else:
            out.append(CODE + '\n' + src)
    return '\n\n'.join(out) + '\n'


def _cell(kind, lines):
    while lines and not lines[-1].strip(): lines.pop()
    while lines and not lines[0].strip(): lines.pop(0)
    if kind == 'markdown':
        lines = [l[2:] if l.startswith('# ') else l[1:] if l.startswith('#') else l for l in lines]
    src = '\n'.join(lines)
    cell = {'cell_type': kind, 'metadata': {}, 'source': src.splitlines(keepends=True)}
    if kind == 'code': cell.update(execution_count=None, outputs=[])
    return cell


def to_nb(py_text):
    cells, kind, buf = [], None, []
    for line in py_text.split('\n'):
        if line.strip() in (CODE, MD):
            if kind: cells.append(_cell(kind, buf))
            kind, buf = ('markdown' if line.strip() == MD else 'code'), []
        else:
            buf.append(line)
    if kind: cells.append(_cell(kind, buf))
    for i, c in enumerate(cells):   # stable ids, so exporting the same text twice gives the same library
        c['id'] = hashlib.sha1(f"{i}:{''.join(c['source'])}".encode()).hexdigest()[:8]
    return {'cells': cells, 'metadata': {'kernelspec': {'display_name': 'python3', 'language': 'python', 'name': 'python3'}},
            'nbformat': 4, 'nbformat_minor': 5}


if __name__ == '__main__':
    cmd, *args = sys.argv[1:]
    if cmd == 'to-py': sys.stdout.write(to_py(args[0]))
    elif cmd == 'to-nb': Path(args[1]).write_text(json.dumps(to_nb(Path(args[0]).read_text()), indent=1, ensure_ascii=False) + '\n')
    else: raise SystemExit(f'unknown command {cmd!r}: use to-py or to-nb')
