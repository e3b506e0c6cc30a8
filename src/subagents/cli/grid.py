"""A borderless table of many rows, laid out in one pass: ``ps`` over thousands of jobs.

rich's ``Table`` measures every cell several times and wraps them as renderables: 5,000 rows
took it seconds. This lays out plain text in O(cells): each fixed column as wide as its
widest cell (within its bounds), the flexible ones sharing what is left of the width, a cell
too long for its column cut with an ellipsis, the last column folded onto more lines rather
than cut (as ``cli.app.table`` does). Widths are terminal cells (``rich.cells``), so wide
characters line up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rich.cells import cell_len as _rich_cell_len
from rich.cells import get_character_cell_size, set_cell_size

GAP = "  "


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes (ASCII, nearly every cell: its length, at once)."""
    return len(text) if text.isascii() else _rich_cell_len(text)


# The least a flexible column is given, however narrow the terminal.
MIN_FLEX = 10


@dataclass
class Column:
    header: str
    min_width: int = 0
    max_width: int | None = None
    justify: Literal["left", "center", "right"] = "left"
    ratio: int | None = None


@dataclass
class Grid:
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))

    def widths(self, width: int) -> list[int]:
        """Each column's width for a table at most ``width`` cells wide."""
        natural = [cell_len(c.header) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                n = cell_len(cell)
                if n > natural[i]:
                    natural[i] = n
        out: list[int] = []
        for column, n in zip(self.columns, natural, strict=True):
            n = max(n, column.min_width)
            out.append(min(n, column.max_width) if column.max_width else n)
        flex = [i for i, c in enumerate(self.columns) if c.ratio]
        if not flex:
            return out
        fixed = sum(w for i, w in enumerate(out) if i not in flex)
        left = width - fixed - len(GAP) * (len(out) - 1)
        total = sum(self.columns[i].ratio or 1 for i in flex)
        for i in flex:
            share = left * (self.columns[i].ratio or 1) // total
            out[i] = max(MIN_FLEX, min(out[i], share))
        return out

    def lines(self, width: int) -> list[str]:
        """The table as lines of text, header first."""
        widths = self.widths(width)
        last = len(widths) - 1
        out = [self._line([c.header for c in self.columns], widths, last)]
        indent = " " * (sum(widths[:last]) + len(GAP) * last)
        for row in self.rows:
            cells = list(row)
            folded = _fold(cells[last], widths[last])
            cells[last] = folded[0]
            out.append(self._line(cells, widths, last))
            out.extend(indent + more.rstrip() for more in folded[1:])
        return out

    def _line(self, cells: list[str], widths: list[int], last: int) -> str:
        parts = []
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True)):
            n = cell_len(cell)
            if n > w:
                cell, n = set_cell_size(cell, w - 1) + "…", w
            pad = w - n
            justify = self.columns[i].justify
            if justify == "right":
                cell = " " * pad + cell
            elif justify == "center":
                cell = " " * (pad // 2) + cell + " " * (pad - pad // 2)
            elif i != last:
                cell += " " * pad
            parts.append(cell)
        return GAP.join(parts).rstrip()


def _fold(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces into lines of at most ``width`` cells, a word longer than
    that folded (never no line)."""
    if cell_len(text) <= width:
        return [text]
    if text.isascii():  # one cell a character: cut at the last space that fits
        lines, start = [], 0
        while len(text) - start > width:
            cut = text.rfind(" ", start, start + width + 1)
            after = cut + 1
            if cut <= start:
                cut = after = start + width
            lines.append(text[start:cut])
            start = after
        return [*lines, text[start:]]
    lines = []
    line, used = "", 0
    for word in text.split(" "):
        n = cell_len(word)
        if line and used + 1 + n <= width:
            line, used = f"{line} {word}", used + 1 + n
            continue
        if line:
            lines.append(line)
        line, used = "", 0
        while n > width:  # a word longer than the line: folded
            head = _head(word, width)
            lines.append(head)
            word = word[len(head) :]
            n = cell_len(word)
        line, used = word, n
    lines.append(line)
    return lines


def _head(word: str, width: int) -> str:
    """The longest start of ``word`` within ``width`` cells (at least one character)."""
    used = 0
    for i, ch in enumerate(word):
        used += get_character_cell_size(ch)
        if used > width:
            return word[: max(i, 1)]
    return word
