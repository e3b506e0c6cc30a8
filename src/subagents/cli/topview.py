"""``subagents top``: a full-screen live view of running and recent jobs, one row per run,
built on Textual. It shows what a :class:`JobSource` gives it (the command line gathers the
data): ↑/↓ select, Enter follows the selected run's transcript live, ``s`` stops the selected
job after a confirmation, ``q`` quits.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Label, Log, Static

from subagents.present.figures import elapsed, money, tokens
from subagents.present.jobview import RunRow, Snapshot

REFRESH_S = 1.0
TRANSCRIPT_REFRESH_S = 0.5
COLUMNS = ("JOB", "MODE", "AGENT", "BACKEND", "STATUS", "ELAPSED", "TOOLS", "TOKENS", "COST")
ACTIVITY = "ACTIVITY"


class JobSource(Protocol):
    def snapshot(self) -> Snapshot: ...

    def transcript(self, run_id: str, offset: int) -> tuple[str, int]: ...

    def stop(self, job_id: str) -> str: ...


def _cells(row: RunRow) -> tuple[str, ...]:
    job = row.job_id[:10] if row.first_of_job else "  └"
    return (
        job,
        row.mode if row.first_of_job else "",
        row.agent[:12],
        row.backend,
        row.status,
        elapsed(row.elapsed),
        str(row.tools),
        tokens(row.tokens),
        money(row.cost),
        row.activity,
    )


class TranscriptScreen(Screen[None]):
    """One run's transcript.md, followed as it grows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back"),
    ]

    def __init__(self, source: JobSource, row: RunRow) -> None:
        super().__init__()
        self.source = source
        self.row = row
        self.read_to = 0

    def compose(self) -> ComposeResult:
        yield Static(
            f"transcript · job {self.row.job_id} · run {self.row.run_id} · {self.row.agent}",
            id="title",
        )
        yield Log(id="transcript", highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        self.poll()
        self.set_interval(TRANSCRIPT_REFRESH_S, self.poll)

    def poll(self) -> None:
        if self.row.run_id is None:
            return
        text, self.read_to = self.source.transcript(self.row.run_id, self.read_to)
        if text:
            self.query_one(Log).write(text)


class ConfirmStop(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes, stop it"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Label(f"Stop job {self.job_id}? Its runs are killed. (y/n)")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TopApp(App[None]):
    TITLE = "subagents top"
    CSS = """
    #jobs { height: 1fr; }
    #detail { height: 2; padding: 0 1; color: $text-muted; }
    #totals { height: 1; padding: 0 1; background: $boost; }
    #title { height: 1; padding: 0 1; background: $boost; }
    ConfirmStop { align: center middle; }
    #confirm { width: 60; height: 5; border: thick $error; padding: 1 2; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("s", "stop", "Stop job"),
    ]  # Enter is the table's own: it selects the row (RowSelected), which follows it

    def __init__(self, source: JobSource) -> None:
        super().__init__()
        self.source = source
        self.rows: list[RunRow] = []

    def compose(self) -> ComposeResult:
        table: DataTable[str] = DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="detail")
        yield Static("", id="totals")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in (*COLUMNS, ACTIVITY):
            table.add_column(col, key=col)
        self.refresh_rows()
        self.set_interval(REFRESH_S, self.refresh_rows)
        table.focus()

    def selected(self) -> RunRow | None:
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row < 0 or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def refresh_rows(self) -> None:
        snap = self.source.snapshot()
        table = self.query_one(DataTable)
        chosen = self.selected()
        keep = chosen.key if chosen else None
        table.clear()
        for row in snap.rows:
            table.add_row(*_cells(row), key=row.key)
        self.rows = snap.rows
        keys = [r.key for r in self.rows]
        if keep in keys:
            table.move_cursor(row=keys.index(keep))
        self.show_detail()
        self.query_one("#totals", Static).update(snap.footer())

    def show_detail(self) -> None:
        row = self.selected()
        text = "no jobs yet" if row is None else f"{row.job_id} {row.run_id or ''}\n{row.activity}"
        self.query_one("#detail", Static).update(text)

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.show_detail()

    @on(DataTable.RowSelected)
    def _selected(self) -> None:
        self.action_follow()

    def action_follow(self) -> None:
        row = self.selected()
        if row is not None and row.run_id is not None:
            self.push_screen(TranscriptScreen(self.source, row))

    def action_stop(self) -> None:
        row = self.selected()
        if row is None:
            return
        job_id = row.job_id

        def answered(yes: bool | None) -> None:
            if yes:
                self.notify(f"stopping {job_id}…")
                self.run_worker(lambda: self._stop(job_id), thread=True)

        self.push_screen(ConfirmStop(job_id), answered)

    def _stop(self, job_id: str) -> None:
        try:
            status = self.source.stop(job_id)
        except Exception as exc:  # shown, never fatal to the view
            self.call_from_thread(self.notify, f"{job_id}: {exc}", severity="error")
            return
        self.call_from_thread(self.notify, f"{job_id}: {status}")
        self.call_from_thread(self.refresh_rows)


def run_top(source: JobSource) -> None:
    TopApp(source).run()
