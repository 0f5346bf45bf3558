"""Self-contained HTML pages: tables and inline SVG charts, no external files or scripts."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import jinja2


@dataclass
class TableData:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    # the columns that are text (left-aligned, wrapping at spaces): the first N, or these indexes;
    # the rest are numbers (right-aligned, never cut)
    text_columns: int | tuple[int, ...] = 1
    fold_after: int | None = None  # rows beyond this many folded away in HTML (a "N more rows" to open)
    conclusion: tuple[int, ...] = ()  # the columns that carry the answer: a narrow terminal drops them last

    def is_text(self, column: int) -> bool:
        return is_text(self.text_columns, column)


def is_text(text_columns: int | tuple[int, ...], column: int) -> bool:
    return column < text_columns if isinstance(text_columns, int) else column in text_columns


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)
    tables: list[TableData] = field(default_factory=list)


def render(title: str, subtitle: str, sections: list[Section], verdict: list[str] | None = None) -> str:
    """The page: the verdict (the answer, in sentences) first, a contents list, then the sections,
    each folding."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    source = resources.files("dbtier.report").joinpath("templates/page.html.j2").read_text()
    return env.from_string(source).render(title=title, subtitle=subtitle, sections=sections, verdict=verdict or [])


def write(path: Path, title: str, subtitle: str, sections: list[Section], verdict: list[str] | None = None) -> None:
    from dbtier.workspace import write_private
    write_private(Path(path), render(title, subtitle, sections, verdict), mode=0o644)  # whole, or as it was
