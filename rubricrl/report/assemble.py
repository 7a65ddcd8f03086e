"""The run report: the stages' report sections (and the registry's decisions) assembled into one Markdown file and
one self-contained HTML page.

Nothing is computed here: every number comes from a section its stage wrote (rubricrl.stages.paths names each),
so the report and the stage metrics agree by construction. A section's headings move one level down under its
stage's heading; an image it references (relative to its own folder) is copied beside report.md and embedded in
the HTML as a data URI. A section not written yet is a "Not produced yet" note, never an error. Markdown -> HTML
is markdown-it-py (CommonMark with tables); the page is a jinja2 template.
"""

from __future__ import annotations

import base64
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from rubricrl.core.atomic import write_text

NOT_PRODUCED = "Not produced yet"
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,5}) ", re.M)

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
img { max-width: 100%; }
code, pre { background: #f6f6f6; }
pre { padding: 0.5rem; overflow-x: auto; }
.missing { color: #8a5a00; }
nav li { margin: 0.1rem 0; }
</style></head>
<body>
{{ body }}
</body></html>
"""


@dataclass(frozen=True)
class Section:
    key: str  # the stage (or "registry")
    title: str
    path: Path  # its Markdown file
    producer: str  # who writes it (for the "Not produced yet" note)
    keep_title: bool = False  # its first-level headings are parts (one per decision), not the section's title


@dataclass
class Report:
    markdown: str
    html: str
    files: list[Path]
    figures: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _demote(text: str) -> str:
    """Every heading one level down: a section's '# Title' becomes '## Title' under the report's title."""
    return _HEADING.sub(lambda m: "#" + m.group(1) + " ", text)


def _strip_title(text: str) -> str:
    """The section without its own first-level title (the report writes the stage's heading instead)."""
    lines = text.lstrip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def assemble(sections: list[Section], out_dir: str | Path, title: str = "RubricRL run report",
             meta: dict | None = None) -> Report:
    """Write report.md, report.html and the figures the sections reference into out_dir."""
    from jinja2 import Environment
    from markdown_it import MarkdownIt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts, figures, missing, embedded = [], [], [], {}
    for s in sections:
        if not s.path.is_file():
            missing.append(s.key)
            parts.append(f"## {s.title}\n\n**{NOT_PRODUCED}:** `{s.path}` (written by the `{s.producer}` stage).")
            continue
        try:
            raw = s.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            missing.append(s.key)
            parts.append(f"## {s.title}\n\n**Not readable:** `{s.path}` ({type(err).__name__}: {err}).")
            continue
        text = _demote(_demote(raw.strip())) if s.keep_title else _demote(_strip_title(raw))

        def image(m, s=s):
            src = s.path.parent / m.group("src")
            if not src.is_file():
                return f"*(figure `{m.group('src')}` not produced)*"
            name = f"{s.key}-{src.name}"
            shutil.copyfile(src, out_dir / name)
            figures.append(out_dir / name)
            embedded[name] = "data:image/png;base64," + base64.b64encode(src.read_bytes()).decode("ascii")
            return f"![{m.group('alt')}]({name})"

        parts.append(f"## {s.title}\n\n" + _IMAGE.sub(image, text))
    head = [f"# {title}", ""]
    if meta:
        head += ["; ".join(f"{k}: `{v}`" for k, v in meta.items()), ""]
    head += ["Sections: " + ", ".join(f"[{s.title}](#{_anchor(s.title)})" for s in sections) + ".", ""]
    markdown = "\n".join(head) + "\n\n".join(parts) + "\n"
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.core.ruler.push("anchors", _anchors)
    body = md.render(markdown)
    for name, uri in embedded.items():  # one self-contained file: the PNGs as data URIs
        body = body.replace(f'src="{name}"', f'src="{uri}"')
    page = Environment(autoescape=False).from_string(PAGE).render(title=title, body=body)
    write_text(out_dir / "report.md", markdown)
    write_text(out_dir / "report.html", page)
    return Report(markdown, page, [out_dir / "report.md", out_dir / "report.html", *figures], figures, missing)


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _anchors(state) -> None:
    """An id on every second-level heading, so the contents line links to the sections."""
    tokens = state.tokens
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h2" and i + 1 < len(tokens):
            tok.attrSet("id", _anchor(tokens[i + 1].content))
