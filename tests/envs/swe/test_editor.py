"""`str_replace_editor` semantics: view, create, str_replace, insert, undo_edit (local sandbox)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from envs.swe.config import ToolsConfig
from envs.swe.editor import EditorResult, FileEditor
from envs.swe.editor_text import (
    clip_text,
    insert_after_line,
    match_line_numbers,
    number_lines,
    split_lines,
)
from harness.sandbox.local import LocalSandbox
from tests.envs.swe.tiny_task import FAST_LIMITS

FILE = "/testbed/pkg/mod.py"
TEN_LINES = "".join(f"line {n}\n" for n in range(1, 11))


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    box = LocalSandbox(tmp_path, workdir="/testbed", limits=FAST_LIMITS)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(TEN_LINES)
    yield box
    await box.aclose()


@pytest.fixture
def editor(sandbox: LocalSandbox) -> FileEditor:
    return FileEditor(sandbox, ToolsConfig())


async def run(editor: FileEditor, **arguments: Any) -> EditorResult:
    return await editor.run(arguments)


def read(sandbox: LocalSandbox, path: str = "pkg/mod.py") -> str:
    return (sandbox.root / path).read_text()


# -- pure text operations ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []), ("a", ["a"]), ("a\n", ["a\n"]), ("a\nb", ["a\n", "b"]),
        ("a\r\nb\x0cc\n", ["a\r\n", "b\x0cc\n"]),
    ],
)  # fmt: skip
def test_lines_end_only_at_newline_characters(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines


def test_number_lines_matches_cat_n() -> None:
    assert number_lines("a\nb\n", 9) == "     9\ta\n    10\tb"


def test_match_line_numbers_lists_the_line_of_each_occurrence() -> None:
    assert match_line_numbers("x = 1\ny = 2\nx = 3\n", "x =") == [1, 3]


@pytest.mark.parametrize(
    ("text", "line", "new_str", "expected"),
    [
        ("a\nb\n", 0, "x", "x\na\nb\n"),
        ("a\nb\n", 1, "x\n", "a\nx\nb\n"),
        ("a\nb\n", 2, "x\ny", "a\nb\nx\ny\n"),
        ("a\nb", 2, "x", "a\nb\nx\n"),
        ("", 0, "x", "x\n"),
    ],
)
def test_insert_adds_whole_lines_after_the_given_line(
    text: str, line: int, new_str: str, expected: str
) -> None:
    assert insert_after_line(text, line, new_str) == expected


def test_clip_text_cuts_and_says_how_to_see_the_rest() -> None:
    clipped = clip_text("x" * 500, 100)
    assert clipped.startswith("x" * 100) and "grep -n" in clipped and len(clipped) < 400


# -- view ----------------------------------------------------------------------------------------


async def test_view_shows_the_file_with_line_numbers(editor: FileEditor) -> None:
    result = await run(editor, command="view", path=FILE)
    assert result.ok
    assert f"cat -n` on {FILE}" in result.output
    assert "     1\tline 1\n" in result.output and "    10\tline 10" in result.output


async def test_view_range_shows_only_those_lines(editor: FileEditor) -> None:
    result = await run(editor, command="view", path=FILE, view_range=[3, 4])
    assert "     3\tline 3\n     4\tline 4\n" in result.output
    assert "line 2" not in result.output and "line 5" not in result.output


async def test_view_range_end_minus_one_means_to_the_end(editor: FileEditor) -> None:
    result = await run(editor, command="view", path=FILE, view_range=[9, -1])
    assert "     9\tline 9" in result.output and "    10\tline 10" in result.output
    assert "line 8" not in result.output


async def test_view_range_past_the_end_is_clamped(editor: FileEditor) -> None:
    result = await run(editor, command="view", path=FILE, view_range=[10, 500])
    assert result.ok and "    10\tline 10" in result.output


@pytest.mark.parametrize(
    ("view_range", "fragment"),
    [
        ([0, 3], "first element `0`"), ([11, 12], "[1, 10]"), ([5, 2], "second element `2`"),
        ([1], "two integers"),
    ],
)  # fmt: skip
async def test_invalid_view_ranges_are_explained(
    editor: FileEditor, view_range: list[int], fragment: str
) -> None:
    result = await run(editor, command="view", path=FILE, view_range=view_range)
    assert not result.ok and fragment in result.output


async def test_long_views_are_clipped(sandbox: LocalSandbox) -> None:
    (sandbox.root / "big.txt").write_text("y" * 5000 + "\n")
    editor = FileEditor(sandbox, ToolsConfig(view_max_chars=200))
    result = await run(editor, command="view", path="/testbed/big.txt")
    assert "<response clipped>" in result.output and len(result.output) < 1000


async def test_view_of_a_directory_lists_two_levels_without_hidden_entries(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    (sandbox.root / "pkg" / "sub" / "deep").mkdir(parents=True)
    (sandbox.root / "pkg" / "sub" / "deep" / "far.py").write_text("")
    (sandbox.root / ".git").mkdir()
    (sandbox.root / "pkg" / ".hidden").write_text("")
    result = await run(editor, command="view", path="/testbed")
    lines = result.output.splitlines()
    assert result.ok and "up to 2 levels deep in /testbed" in lines[0]
    assert {"/testbed/pkg", "/testbed/pkg/mod.py", "/testbed/pkg/sub"} <= set(lines)
    assert not any(".git" in line or ".hidden" in line or "deep" in line for line in lines[1:])


async def test_view_range_on_a_directory_is_refused(editor: FileEditor) -> None:
    result = await run(editor, command="view", path="/testbed/pkg", view_range=[1, 2])
    assert not result.ok and "not allowed when `path` points to a directory" in result.output


async def test_relative_paths_are_refused_with_a_suggestion(editor: FileEditor) -> None:
    result = await run(editor, command="view", path="pkg/mod.py")
    assert not result.ok and "Maybe you meant /testbed/pkg/mod.py?" in result.output


async def test_view_of_a_missing_path_says_it_does_not_exist(editor: FileEditor) -> None:
    result = await run(editor, command="view", path="/testbed/nope.py")
    assert not result.ok and "does not exist" in result.output


# -- create --------------------------------------------------------------------------------------


async def test_create_writes_a_new_file_and_its_directories(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    result = await run(editor, command="create", path="/testbed/new/dir/x.py", file_text="x = 1\n")
    assert result.ok and "File created successfully at: /testbed/new/dir/x.py" in result.output
    assert read(sandbox, "new/dir/x.py") == "x = 1\n"


async def test_create_never_overwrites(sandbox: LocalSandbox, editor: FileEditor) -> None:
    result = await run(editor, command="create", path=FILE, file_text="gone")
    assert not result.ok and "File already exists" in result.output
    assert read(sandbox) == TEN_LINES


async def test_create_on_a_directory_is_refused(editor: FileEditor) -> None:
    result = await run(editor, command="create", path="/testbed/pkg", file_text="x")
    assert not result.ok and "is a directory" in result.output


async def test_create_needs_file_text(editor: FileEditor) -> None:
    result = await run(editor, command="create", path="/testbed/y.py")
    assert (
        not result.ok and "Parameter `file_text` is required for command: create" in result.output
    )


# -- str_replace ---------------------------------------------------------------------------------


async def test_str_replace_of_a_unique_match_edits_and_shows_a_snippet(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    result = await run(
        editor, command="str_replace", path=FILE, old_str="line 5\n", new_str="five\n"
    )
    assert result.ok and "has been edited" in result.output
    assert read(sandbox) == TEN_LINES.replace("line 5\n", "five\n")
    snippet = [line for line in result.output.splitlines() if "\t" in line]
    assert snippet[0] == "     1\tline 1" and snippet[-1] == "     9\tline 9"  # 4 lines around
    assert "     5\tfive" in snippet


async def test_str_replace_without_a_match_changes_nothing_and_says_so(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    result = await run(editor, command="str_replace", path=FILE, old_str="line 99", new_str="x")
    assert not result.ok and "did not appear verbatim" in result.output
    assert read(sandbox) == TEN_LINES


async def test_str_replace_with_several_matches_lists_their_lines_and_changes_nothing(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    result = await run(editor, command="str_replace", path=FILE, old_str="line 1", new_str="x")
    assert not result.ok
    assert "Multiple occurrences of old_str `line 1` in lines [1, 10]" in result.output
    assert read(sandbox) == TEN_LINES


async def test_str_replace_keeps_tabs(sandbox: LocalSandbox, editor: FileEditor) -> None:
    (sandbox.root / "Makefile").write_text("all:\n\techo a\n")
    result = await run(
        editor, command="str_replace", path="/testbed/Makefile", old_str="echo a", new_str="echo b"
    )
    assert result.ok and read(sandbox, "Makefile") == "all:\n\techo b\n"


@pytest.mark.parametrize(
    ("old_str", "new_str", "fragment"),
    [("", "x", "must not be empty"), ("line 3", "line 3", "identical")],
)
async def test_degenerate_replacements_are_refused(
    editor: FileEditor, old_str: str, new_str: str, fragment: str
) -> None:
    result = await run(editor, command="str_replace", path=FILE, old_str=old_str, new_str=new_str)
    assert not result.ok and fragment in result.output


async def test_editing_a_missing_file_says_it_does_not_exist(editor: FileEditor) -> None:
    result = await run(
        editor, command="str_replace", path="/testbed/x.py", old_str="a", new_str="b"
    )
    assert not result.ok and "/testbed/x.py does not exist" in result.output


async def test_editing_a_non_utf8_file_is_refused(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    (sandbox.root / "blob.bin").write_bytes(b"\xff\xfe\x00a")
    result = await run(
        editor, command="str_replace", path="/testbed/blob.bin", old_str="a", new_str="b"
    )
    assert not result.ok and "not UTF-8" in result.output


# -- insert --------------------------------------------------------------------------------------


async def test_insert_puts_new_lines_after_the_given_line(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    result = await run(editor, command="insert", path=FILE, insert_line=2, new_str="two and a half")
    assert result.ok and "has been edited" in result.output
    assert read(sandbox).splitlines()[:4] == ["line 1", "line 2", "two and a half", "line 3"]
    assert "     3\ttwo and a half" in result.output


@pytest.mark.parametrize("line", [-1, 11])
async def test_insert_outside_the_file_is_refused(
    sandbox: LocalSandbox, editor: FileEditor, line: int
) -> None:
    result = await run(editor, command="insert", path=FILE, insert_line=line, new_str="x")
    assert not result.ok and "[0, 10]" in result.output
    assert read(sandbox) == TEN_LINES


# -- undo_edit -----------------------------------------------------------------------------------


async def test_undo_restores_the_content_before_the_last_edit(
    sandbox: LocalSandbox, editor: FileEditor
) -> None:
    await run(editor, command="str_replace", path=FILE, old_str="line 5\n", new_str="five\n")
    await run(editor, command="insert", path=FILE, insert_line=0, new_str="top")
    first = await run(editor, command="undo_edit", path=FILE)
    assert first.ok and "undone successfully" in first.output
    assert read(sandbox) == TEN_LINES.replace("line 5\n", "five\n")
    await run(editor, command="undo_edit", path=FILE)
    assert read(sandbox) == TEN_LINES


async def test_undo_without_history_says_so(editor: FileEditor) -> None:
    result = await run(editor, command="undo_edit", path=FILE)
    assert not result.ok and f"No edit history found for {FILE}" in result.output


async def test_failed_edits_leave_no_undo_history(editor: FileEditor) -> None:
    await run(editor, command="str_replace", path=FILE, old_str="nope", new_str="x")
    result = await run(editor, command="undo_edit", path=FILE)
    assert not result.ok


# -- bounds: no agent can make one call expensive ------------------------------------------------


async def test_files_over_the_size_limit_are_refused_and_left_alone(
    sandbox: LocalSandbox,
) -> None:
    (sandbox.root / "big.txt").write_text("z\n" * 2000)  # 4000 bytes
    editor = FileEditor(sandbox, ToolsConfig(editor_max_file_mb=0.001))  # 1048 bytes
    for arguments in (
        {"command": "view", "path": "/testbed/big.txt"},
        {"command": "str_replace", "path": "/testbed/big.txt", "old_str": "z", "new_str": "q"},
        {"command": "insert", "path": "/testbed/big.txt", "insert_line": 0, "new_str": "q"},
    ):
        result = await editor.run(arguments)
        assert not result.ok and "over the editor's limit of 0.001 MB" in result.output
        assert "sed" in result.output
    assert read(sandbox, "big.txt") == "z\n" * 2000


async def test_many_matches_list_a_bounded_number_of_lines_and_count_the_rest(
    sandbox: LocalSandbox,
) -> None:
    (sandbox.root / "many.txt").write_text("x\n" * 500)
    editor = FileEditor(sandbox, ToolsConfig(editor_max_listed_matches=3))
    result = await run(editor, command="str_replace", path="/testbed/many.txt", old_str="x",
                       new_str="y")  # fmt: skip
    assert not result.ok and "in lines [1, 2, 3] and 497 more" in result.output


async def test_a_huge_old_str_is_quoted_only_in_part(editor: FileEditor) -> None:
    result = await run(editor, command="str_replace", path=FILE, old_str="q" * 100_000,
                       new_str="x")  # fmt: skip
    assert not result.ok and "[99600 more characters]" in result.output
    assert len(result.output) < 1000


async def test_non_text_arguments_are_refused_with_their_type(editor: FileEditor) -> None:
    result = await run(editor, command="str_replace", path=FILE, old_str=["line 1"], new_str="x")
    assert not result.ok and "must be a string, not list" in result.output


async def test_undo_history_forgets_the_oldest_versions_past_its_bound(
    sandbox: LocalSandbox,
) -> None:
    editor = FileEditor(sandbox, ToolsConfig(editor_undo_max_mb=150 / (1024 * 1024)))  # 150 B
    for n in range(1, 6):  # each kept version is about 70 bytes: two fit
        await run(editor, command="str_replace", path=FILE, old_str=f"line {n}\n",
                  new_str=f"L{n}\n")  # fmt: skip
    assert (await run(editor, command="undo_edit", path=FILE)).ok
    assert (await run(editor, command="undo_edit", path=FILE)).ok
    third = await run(editor, command="undo_edit", path=FILE)
    assert not third.ok and "No edit history" in third.output
    assert read(sandbox).startswith("L1\nL2\nL3\nline 4\n")


async def test_calls_on_a_10_mb_file_never_hold_the_event_loop(sandbox: LocalSandbox) -> None:
    """Issue 28: one str_replace with a short, frequent old_str froze every sample for 11 s
    (1 MB) to minutes (13.5 MB). Now the work runs in a worker thread, in linear time: a
    ticker on the loop keeps ticking while the editor works."""
    (sandbox.root / "huge.py").write_text("x = 1\n" * 1_700_000 + "unique_tail\n")
    editor = FileEditor(sandbox, ToolsConfig())
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = loop.time()
            gaps.append(now - last)
            last = now

    async def attack() -> list[EditorResult]:
        try:
            return [
                await run(editor, command="str_replace", path="/testbed/huge.py", old_str="x",
                          new_str="y"),
                await run(editor, command="str_replace", path="/testbed/huge.py",
                          old_str="unique_tail", new_str="changed_tail"),
                await run(editor, command="view", path="/testbed/huge.py"),
                await run(editor, command="insert", path="/testbed/huge.py",
                          insert_line=1_500_000, new_str="inserted"),
            ]  # fmt: skip
        finally:
            done.set()

    started = time.perf_counter()
    _, results = await asyncio.gather(ticker(), attack())
    elapsed = time.perf_counter() - started
    assert "and 1699980 more" in results[0].output
    assert [result.ok for result in results] == [False, True, True, True]
    assert max(gaps) < 0.25, f"the loop stalled for {max(gaps):.2f} s"
    assert elapsed < 30
