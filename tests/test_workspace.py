"""The sandboxed workspace tools, called as the loop calls them: by keyword, and through a Toolbox."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looptrace.loop.tools import INVALID_ARGUMENTS, TOOL_NOT_FOUND, Toolbox, ToolError
from looptrace.loop.workspace import limit_text, workspace_tools

MARKER = re.compile(r"\n\[\.\.\. truncated: (\d+) more bytes not shown\]\Z")


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Callable[..., str]]:
    """The tools of a workspace at ``tmp_path``, by name."""
    return {tool.name: tool.run for tool in workspace_tools(tmp_path)}


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def test_tool_names_and_writable_flag(tmp_path: Path) -> None:
    assert [t.name for t in workspace_tools(tmp_path)] == [
        "list_dir", "read_file", "search", "write_file", "calculator"]
    assert "write_file" not in [t.name for t in workspace_tools(tmp_path, writable=False)]
    for tool in workspace_tools(tmp_path):
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False


def test_list_dir(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "b.txt", "hello")
    write(tmp_path / "a" / "inner.txt", "x")
    write(tmp_path / "c.bin", b"\0" * 10)
    (tmp_path / "empty").mkdir()
    assert ws["list_dir"]() == "a/\nb.txt  5 bytes\nc.bin  10 bytes\nempty/"
    assert ws["list_dir"](path="a") == "inner.txt  1 bytes"
    assert ws["list_dir"](path="empty") == "(empty folder: empty)"
    with pytest.raises(ToolError, match=r"not a folder: b\.txt"):
        ws["list_dir"](path="b.txt")


def test_list_dir_caps_entries(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    for i in range(503):
        (tmp_path / f"f{i:03}").touch()
    lines = ws["list_dir"]().splitlines()
    assert len(lines) == 501
    assert lines[0] == "f000  0 bytes" and lines[499] == "f499  0 bytes"
    assert lines[-1] == "... 3 more entries"


@pytest.mark.parametrize(
    ("offset", "limit", "expected"),
    [
        (1, 200, [f"{i:>4}| line {i}" for i in range(1, 201)] + ["[lines 1-200 of 250; next: offset=201]"]),
        (201, 200, [f"{i:>4}| line {i}" for i in range(201, 251)]),
        (12, 2, ["  12| line 12", "  13| line 13", "[lines 12-13 of 250; next: offset=14]"]),
        (250, 1, [" 250| line 250"]),
        (251, 10, ["[offset 251 is past the end: big.txt has 250 lines]"]),
    ],
)
def test_read_file_pages(tmp_path: Path, ws: dict[str, Callable[..., str]], offset: int, limit: int,
                         expected: list[str]) -> None:
    write(tmp_path / "big.txt", numbered(250))
    assert ws["read_file"](path="big.txt", offset=offset, limit=limit).splitlines() == expected


def test_read_file_wide_line_numbers_and_crlf(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "long.txt", numbered(12345))
    assert ws["read_file"](path="long.txt", offset=12344) == "12344| line 12344\n12345| line 12345"
    write(tmp_path / "dos.txt", "one\r\ntwo")
    assert ws["read_file"](path="dos.txt") == "   1| one\n   2| two"
    write(tmp_path / "empty.txt", "")
    assert ws["read_file"](path="empty.txt") == "[empty file: empty.txt]"


def test_read_file_stops_before_the_cap_so_the_footer_survives(tmp_path: Path) -> None:
    write(tmp_path / "wide.txt", "".join(f"{i:04} {'x' * 95}\n" for i in range(1, 101)))
    run = {t.name: t.run for t in workspace_tools(tmp_path, max_result_bytes=1000)}["read_file"]
    out = run(path="wide.txt")
    assert len(out.encode()) <= 1000 and "truncated" not in out
    footer = out.splitlines()[-1]
    shown = int(re.fullmatch(r"\[lines 1-(\d+) of 100; next: offset=(\d+)\]", footer)[1])  # type: ignore[index]
    assert 1 <= shown < 100 and f"next: offset={shown + 1}" in footer
    assert run(path="wide.txt", offset=shown + 1).startswith(f"{shown + 1:>4}| {shown + 1:04} ")


def test_read_file_errors_and_invalid_utf8(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    with pytest.raises(ToolError, match=r"binary file: image\.png"):
        ws["read_file"](path="image.png")
    with pytest.raises(ToolError, match=r"no such file: missing\.txt"):
        ws["read_file"](path="missing.txt")
    (tmp_path / "folder").mkdir()
    with pytest.raises(ToolError, match="is a folder"):
        ws["read_file"](path="folder")
    write(tmp_path / "latin1.txt", "café\n".encode("latin-1") + b"ok\n")
    assert ws["read_file"](path="latin1.txt") == "   1| caf\ufffd\n   2| ok"


def test_search_with_glob(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "src" / "app.py", "import os\ndef main():\n    return os.getcwd()\n")
    write(tmp_path / "src" / "notes.txt", "os is mentioned here\n")
    write(tmp_path / "z.py", "x = 1\n" + "os" * 200 + "\n")
    write(tmp_path / "blob.py", b"os\0binary")
    assert ws["search"](pattern=r"\bos\b", glob="*.py").splitlines() == [
        "src/app.py:1: import os",
        "src/app.py:3:     return os.getcwd()",
    ]
    assert ws["search"](pattern="os", path="src", glob="*.txt") == "src/notes.txt:1: os is mentioned here"
    assert ws["search"](pattern="(os)+$", path="z.py") == "z.py:2: " + "os" * 100
    assert ws["search"](pattern="nothing") == "no matches for 'nothing' in ."


def test_search_caps_matches(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "a.txt", "hit\n" * 60)
    write(tmp_path / "b.txt", "hit\n" * 60)
    lines = ws["search"](pattern="hit").splitlines()
    assert len(lines) == 101
    assert lines[0] == "a.txt:1: hit" and lines[99] == "b.txt:40: hit"
    assert lines[-1] == "... 20 more matches"


def test_search_invalid_regex(ws: dict[str, Callable[..., str]]) -> None:
    with pytest.raises(ToolError, match=r"invalid regex '\(unclosed': missing \), unterminated subpattern"):
        ws["search"](pattern="(unclosed")


def test_write_then_read(tmp_path: Path, ws: dict[str, Callable[..., str]]) -> None:
    assert ws["write_file"](path="new/deep/note.md", content="héllo\nworld\n") == \
        "wrote 13 bytes to new/deep/note.md"
    assert ws["read_file"](path="new/deep/note.md") == "   1| héllo\n   2| world"
    assert ws["write_file"](path="new/deep/note.md", content="x") == "wrote 1 bytes to new/deep/note.md"
    assert (tmp_path / "new" / "deep" / "note.md").read_text() == "x"
    with pytest.raises(ToolError, match="is a folder"):
        ws["write_file"](path="new", content="x")


@pytest.mark.parametrize("tool", ["list_dir", "read_file", "search", "write_file"])
@pytest.mark.parametrize("path", ["..", "../outside.txt", "a/../../outside.txt", "/etc/passwd", "link",
                                  "link/secret.txt", "filelink"])
def test_paths_outside_the_workspace_are_refused(tmp_path: Path, tool: str, path: str) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(outside / "secret.txt", "secret\n")
    write(tmp_path / "outside.txt", "secret\n")
    root.mkdir()
    (root / "link").symlink_to(outside)
    (root / "filelink").symlink_to(outside / "secret.txt")
    run = {t.name: t.run for t in workspace_tools(root)}[tool]
    args = {"write_file": {"content": "x"}, "search": {"pattern": "secret"}}.get(tool, {})
    with pytest.raises(ToolError, match=f"path outside the workspace: {re.escape(path)}"):
        run(path=path, **args)
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_absolute_paths_inside_the_workspace_are_allowed(tmp_path: Path,
                                                         ws: dict[str, Callable[..., str]]) -> None:
    write(tmp_path / "a.txt", "hi\n")
    assert ws["read_file"](path=str(tmp_path / "a.txt")) == "   1| hi"


def test_search_skips_symlinks_that_leave_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(tmp_path / "secret.txt", "secret\n")
    write(root / "own.txt", "secret of my own\n")
    (root / "filelink").symlink_to(tmp_path / "secret.txt")
    (root / "dirlink").symlink_to(tmp_path)
    run = {t.name: t.run for t in workspace_tools(root)}["search"]
    assert run(pattern="secret") == "own.txt:1: secret of my own"
    listing = {t.name: t.run for t in workspace_tools(root)}["list_dir"]()
    assert listing == "dirlink@\nfilelink@\nown.txt  17 bytes"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3", 5), ("7 // 2", 3), ("7 % 3", 1), ("7 / 2", 3.5), ("-(2 ** 10)", -1024), ("+4", 4),
        ("2 ** -1", 0.5), ("(1 + 2) * 3", 9), ("sqrt(16)", 4.0), ("log(e)", 1.0), ("exp(0)", 1.0),
        ("sin(0) + cos(0)", 1.0), ("abs(-3)", 3), ("round(2.567, 2)", 2.57), ("min(3, 1, 2)", 1),
        ("max(3, 1, 2)", 3), ("2 * pi", 2 * math.pi), ("2 ** 10000", 2**10000), ("1e3", 1000.0),
    ],
    ids=lambda value: str(value)[:20],
)
def test_calculator(ws: dict[str, Callable[..., str]], expression: str, expected: float) -> None:
    assert ws["calculator"](expression=expression) == repr(expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "function '__import__' is not allowed"),
        ("x", "unknown name 'x'"),
        ("2**99999", "exponent 99999 is too large"),
        ("'a'*3", "only numbers are allowed, not str 'a'"),
        ("(1).real", "attribute access is not allowed"),
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("math.sqrt(4)", "function 'math.sqrt' is not allowed"),
        ("(2 ** 10000) ** 10000", "result too large"),
        ("True + 1", "only numbers are allowed"),
        ("1 < 2", "unsupported syntax"),
        ("[1, 2]", "unsupported syntax"),
        ("lambda: 1", "unsupported syntax"),
        ("sqrt(-1)", "math domain error"),
        ("exp(1000)", "cannot evaluate"),
        ("(-8) ** 0.5", "not a real number"),
        ("round(x=1)", "keyword arguments are not allowed"),
        ("max()", "cannot evaluate"),
        ("2 +", "invalid expression"),
    ],
)
def test_calculator_refuses(ws: dict[str, Callable[..., str]], expression: str, message: str) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        ws["calculator"](expression=expression)


@given(st.text(), st.integers(min_value=64, max_value=400))
def test_limit_text_fits_and_counts_what_it_cut(text: str, max_bytes: int) -> None:
    out = limit_text(text, max_bytes)
    data = out.encode()
    assert len(data) <= max_bytes
    if len(text.encode()) <= max_bytes:
        assert out == text
        return
    marker = MARKER.search(out)
    assert marker is not None
    head = out[: marker.start()]
    assert text.startswith(head)
    assert int(marker[1]) == len(text.encode()) - len(head.encode())


def test_limit_text_never_splits_a_character() -> None:
    out = limit_text("€" * 100, 100)  # 3 bytes each: the cut falls inside a character
    head = out[: MARKER.search(out).start()]  # type: ignore[union-attr]
    assert set(head) == {"€"} and out.endswith(f"{300 - len(head.encode())} more bytes not shown]")


def test_results_are_capped(tmp_path: Path) -> None:
    write(tmp_path / "many.txt", "match\n" * 99)
    run = {t.name: t.run for t in workspace_tools(tmp_path, max_result_bytes=300)}["search"]
    out = run(pattern="match")
    assert len(out.encode()) <= 300 and MARKER.search(out)


def test_through_the_toolbox(tmp_path: Path) -> None:
    toolbox = Toolbox(workspace_tools(tmp_path))
    bad = toolbox.call("read_file", {"path": 3})
    assert bad.is_error and bad.error_type == INVALID_ARGUMENTS
    for args in ({}, {"path": "a", "offset": 0}, {"path": "a", "extra": 1}, {"path": "a", "limit": "5"}):
        assert toolbox.call("read_file", args).error_type == INVALID_ARGUMENTS
    assert toolbox.call("nope", {}).error_type == TOOL_NOT_FOUND
    missing = toolbox.call("read_file", {"path": "missing"})
    assert missing.is_error and missing.error_type == "tool_error"
    assert missing.text == "Error: no such file: missing"
    written = toolbox.call("write_file", {"path": "a/b.txt", "content": "hi"})
    assert (written.is_error, written.text) == (False, "wrote 2 bytes to a/b.txt")
    assert toolbox.call("calculator", {"expression": "6 * 7"}).text == "42"


def test_os_errors_become_tool_errors(tmp_path: Path) -> None:
    toolbox = Toolbox(workspace_tools(tmp_path))
    write(tmp_path / "file.txt", "x")
    result = toolbox.call("write_file", {"path": "file.txt/child.txt", "content": "x"})
    assert result.error_type == "tool_error" and str(tmp_path) not in result.text
    assert toolbox.call("write_file", {"path": "s.txt", "content": "\ud800"}).error_type == "tool_error"
    if os.geteuid() != 0:
        (tmp_path / "locked.txt").write_text("x")
        (tmp_path / "locked.txt").chmod(0)
        assert toolbox.call("read_file", {"path": "locked.txt"}).text == \
            "Error: Permission denied: locked.txt"


@pytest.mark.parametrize(("path", "message"), [("loop", "a symlink loop"), ("a\0b", "an invalid name")])
def test_unresolvable_paths(tmp_path: Path, ws: dict[str, Callable[..., str]], path: str,
                            message: str) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ToolError, match=message) as raised:
        ws["read_file"](path=path)
    assert str(tmp_path) not in str(raised.value)


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a folder"):
        workspace_tools(tmp_path / "missing")
