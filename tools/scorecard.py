"""Rewrite the README's scorecard block from the modules' SCORECARD literals (the same table as `iclr25 list --markdown`)."""
import re
from pathlib import Path

from iclr25_nb.core import scorecard_markdown

readme = Path(__file__).resolve().parents[1] / 'README.md'
text = readme.read_text()
new = re.sub(r'(<!-- scorecard[^\n]*-->\n).*?(<!-- /scorecard -->)', lambda m: m[1] + scorecard_markdown() + '\n' + m[2],
             text, flags=re.S)
if new == text and scorecard_markdown() not in text: raise SystemExit('README.md has no scorecard block')
readme.write_text(new)
