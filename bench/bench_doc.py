"""Writes one benchmark's section of docs/benchmarks.md: the text between
<!-- NAME:begin --> and <!-- NAME:end --> is replaced (or appended when the markers are new), so each
script owns its section and the others are kept."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")


def write_section(name, text):
    """Replaces the section `name` of docs/benchmarks.md with `text` (markers added here)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{text.strip()}\n{end}"
    doc = open(DOC).read() if os.path.exists(DOC) else "# Benchmarks\n"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    with open(DOC, "w") as f:
        f.write(doc)
