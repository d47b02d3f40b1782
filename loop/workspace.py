"""Real tools over one sandbox folder (list, read, search, write files) and a calculator.

They let the demo agent do real work offline, so its traces show genuine tool use (paging a long file,
a search hitting its cap, a refused path) rather than canned strings. The sandbox is one rule for every
path: resolve it, ``..`` and symlinks included, and refuse it unless it lands inside the root. Every
result passes through ``limit_text``; ``read_file`` stops adding lines before that cap would cut them,
so its footer (the model's way to ask for the next page) always survives.
"""

from __future__ import annotations

import ast
import fnmatch
import math
import operator
import os
import re
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import IO, Any

from .tools import Tool, ToolError

__all__ = ["limit_text", "workspace_tools"]

MAX_LIST_ENTRIES = 500
MAX_SEARCH_MATCHES = 100
MAX_MATCH_CHARS = 200
MAX_EXPONENT = 10_000
_SNIFF_BYTES = 8192
_MARKER = "\n[... truncated: {} more bytes not shown]"
_MIN_LIMIT = 64  # room for the marker with any realistic byte count
_FOOTER_ROOM = 100
_ROW_OVERHEAD = 14  # line number, "| " and newline, for files of up to 10**10 lines
# str() of an int over 4300 digits raises, and chained powers like (9**9999)**9999 pass the exponent check.
_MAX_RESULT_BITS = 14_000


def limit_text(text: str, max_bytes: int) -> str:
    """``text``, or its head plus a marker saying how many bytes were cut; the result fits ``max_bytes``."""
    if max_bytes < _MIN_LIMIT:
        raise ValueError(f"max_bytes must be at least {_MIN_LIMIT} to leave room for the truncation marker")
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    # Reserve room for the widest marker this text could need; "ignore" drops a character cut in half.
    head = data[: max_bytes - len(_MARKER.format(len(data)).encode())].decode(errors="ignore")
    return head + _MARKER.format(len(data) - len(head.encode()))


def workspace_tools(
    root: str | os.PathLike[str], *, max_result_bytes: int = 16_000, writable: bool = True
) -> list[Tool]:
    """Sandboxed tools over the folder ``root``: list_dir, read_file, search, write_file, calculator."""
    base = Path(root).resolve()
    if not base.is_dir():
        raise ValueError(f"workspace root is not a folder: {root}")
    if max_result_bytes < 4 * _MIN_LIMIT:
        raise ValueError(f"max_result_bytes must be at least {4 * _MIN_LIMIT}")
    ws = _Workspace(base, max_result_bytes)
    path = {"type": "string", "description": "A path relative to the workspace root."}

    def tool(name: str, description: str, schema: dict[str, Any], run: Callable[..., str]) -> Tool:
        return Tool(name, description, schema, _capped(run, base, max_result_bytes))

    tools = [
        tool("list_dir", "List a folder of the workspace, sorted: folders end with '/', symlinks with '@', "
             "files show their size.", _schema([], path={**path, "default": "."}), ws.list_dir),
        tool("read_file", "Read a text file with line numbers: `limit` lines from line `offset` (1-based). "
             "A footer gives the next offset when more lines exist.",
             _schema(["path"], path=path, offset={"type": "integer", "minimum": 1, "default": 1},
                     limit={"type": "integer", "minimum": 1, "default": 200}), ws.read_file),
        tool("search", "Search the text files under `path` whose name matches `glob` for a Python regular "
             f"expression; prints 'path:line: text' for at most {MAX_SEARCH_MATCHES} lines.",
             _schema(["pattern"], pattern={"type": "string"}, path={**path, "default": "."},
                     glob={"type": "string", "default": "*"}), ws.search),
        tool("write_file", "Create or overwrite a UTF-8 text file, creating its folders.",
             _schema(["path", "content"], path=path, content={"type": "string"}), ws.write_file),
        tool("calculator", "Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses, "
             f"{', '.join(_FUNCTIONS)}, and the constants pi and e.",
             _schema(["expression"], expression={"type": "string"}), _calculate),
    ]
    return [t for t in tools if writable or t.name != "write_file"]


def _schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _capped(run: Callable[..., str], root: Path, max_bytes: int) -> Callable[..., str]:
    @wraps(run)
    def capped(**kwargs: Any) -> str:
        try:
            return limit_text(_scrub(run(**kwargs)), max_bytes)
        except ToolError as exc:
            message = str(exc)
        except (OSError, UnicodeError) as exc:
            # Permission denied, a file where a folder should be, unencodable text: the model's to read
            # as a tool_error, with the path as the model knows it rather than the host's.
            message = str(exc)
            if isinstance(exc, OSError) and exc.filename:
                message = f"{exc.strerror}: {os.path.relpath(exc.filename, root)}"
        raise ToolError(limit_text(_scrub(message), max_bytes))

    return capped


def _scrub(text: str) -> str:
    # File names that are not UTF-8 arrive as lone surrogates, which cannot be sent to the API.
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _text_lines(f: IO[bytes]) -> Iterator[bytes] | None:
    """The lines of an open file, or None if it looks binary (a NUL byte near the start)."""
    if b"\0" in f.read(_SNIFF_BYTES):
        return None
    f.seek(0)
    return iter(f)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")


class _Workspace:
    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def resolve(self, path: str, *, must_exist: bool = True) -> Path:
        try:
            # An absolute path replaces the root here, and is then held to the same rule.
            target = (self.root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # not str(exc): it names the host's folders
            raise ToolError(f"cannot resolve path {path!r}: a symlink loop or an invalid name") from exc
        if not target.is_relative_to(self.root):
            raise ToolError(f"path outside the workspace: {path}")
        if must_exist and not target.exists():
            raise ToolError(f"no such file: {path}")
        return target

    def list_dir(self, path: str = ".") -> str:
        folder = self.resolve(path)
        if not folder.is_dir():
            raise ToolError(f"not a folder: {path} (use read_file)")
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        # Symlinks are shown, not followed: their target may lie outside the workspace.
        lines = [f"{e.name}@" if e.is_symlink() else f"{e.name}/" if e.is_dir()
                 else f"{e.name}  {e.stat().st_size} bytes" for e in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"... {len(entries) - MAX_LIST_ENTRIES} more entries")
        return "\n".join(lines) or f"(empty folder: {path})"

    def read_file(self, path: str, offset: int = 1, limit: int = 200) -> str:
        file = self.resolve(path)
        if not file.is_file():
            raise ToolError(f"is a folder, not a file: {path} (use list_dir)" if file.is_dir()
                            else f"not a regular file: {path}")
        offset, end, budget = int(offset), int(offset) + int(limit), self.max_bytes - _FOOTER_ROOM
        rows: list[str] = []
        total = used = 0
        with file.open("rb") as f:
            if (lines := _text_lines(f)) is None:
                raise ToolError(f"binary file: {path}")
            for total, raw in enumerate(lines, 1):
                if total < offset:
                    continue
                text = _decode(raw)
                cost = len(text.encode()) + _ROW_OVERHEAD
                # Stop short of the cap, so the footer that gives the next offset is never cut off.
                if total >= end or (rows and used + cost > budget):
                    total += sum(1 for _ in lines)
                    break
                rows.append(limit_text(text, budget - _ROW_OVERHEAD))
                used += cost
        if not total:
            return f"[empty file: {path}]"
        if not rows:
            return f"[offset {offset} is past the end: {path} has {total} lines]"
        last = offset + len(rows) - 1
        width = max(4, len(str(last)))
        out = [f"{n:>{width}}| {text}" for n, text in enumerate(rows, offset)]
        if last < total:
            out.append(f"[lines {offset}-{last} of {total}; next: offset={last + 1}]")
        return "\n".join(out)

    def search(self, pattern: str, path: str = ".", glob: str = "*") -> str:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regex {pattern!r}: {exc}") from exc
        hits: list[str] = []
        count = 0
        start = self.resolve(path)
        for file in self._walk(start) if start.is_dir() else [start] if start.is_file() else []:
            if not fnmatch.fnmatch(file.name, glob):
                continue
            try:
                with file.open("rb") as f:
                    for n, raw in enumerate(_text_lines(f) or (), 1):
                        if regex.search(line := _decode(raw)):
                            count += 1
                            if count <= MAX_SEARCH_MATCHES:
                                relpath = file.relative_to(self.root).as_posix()
                                hits.append(f"{relpath}:{n}: {line[:MAX_MATCH_CHARS]}")
            except OSError:
                continue  # an unreadable file should not hide the matches in the others
        if count > MAX_SEARCH_MATCHES:
            hits.append(f"... {count - MAX_SEARCH_MATCHES} more matches")
        return "\n".join(hits) or f"no matches for {pattern!r} in {path}"

    def _walk(self, folder: Path) -> Iterator[Path]:
        for parent, subfolders, names in os.walk(folder):  # os.walk does not descend into symlinked folders,
            subfolders.sort()
            for file in (Path(parent, name) for name in sorted(names)):
                try:  # but a symlinked file may point anywhere
                    if file.resolve().is_relative_to(self.root) and file.is_file():
                        yield file
                except (OSError, RuntimeError):
                    continue

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path, must_exist=False)
        if target.is_dir():
            raise ToolError(f"is a folder, not a file: {path}")
        data = content.encode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"wrote {len(data)} bytes to {target.relative_to(self.root).as_posix()}"


_BINARY_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "log": math.log, "exp": math.exp, "sin": math.sin, "cos": math.cos,
    "abs": abs, "round": round, "min": min, "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _calculate(expression: str) -> str:
    try:
        return repr(_evaluate(ast.parse(expression.strip(), mode="eval").body))
    except SyntaxError as exc:
        raise ToolError(f"invalid expression {expression!r}: {exc.msg}") from exc
    except ZeroDivisionError as exc:
        raise ToolError(f"division by zero in {expression!r}") from exc
    except (ArithmeticError, ValueError, TypeError) as exc:  # overflow, math domain, wrong arity
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc
    except (RecursionError, MemoryError) as exc:  # CPython's parser reports deep nesting as MemoryError
        raise ToolError("expression is too deeply nested") from exc


def _evaluate(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id not in _CONSTANTS:
            raise ToolError(f"unknown name {node.id!r}: the only constants are pi and e")
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        return _checked(_UNARY_OPS[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ToolError(f"exponent {right} is too large (the limit is {MAX_EXPONENT})")
            # A lower bound on the result's size refuses a hopeless power before computing it.
            if isinstance(left, int) and isinstance(right, int) \
                    and (abs(left).bit_length() - 1) * right > _MAX_RESULT_BITS:
                raise ToolError("result too large")
        return _checked(_BINARY_OPS[type(node.op)](left, right))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ToolError(f"function {ast.unparse(node.func)!r} is not allowed; "
                            f"allowed: {', '.join(_FUNCTIONS)}")
        if node.keywords:
            raise ToolError("keyword arguments are not allowed")
        return _checked(_FUNCTIONS[node.func.id](*(_evaluate(arg) for arg in node.args)))
    if isinstance(node, ast.Attribute):
        raise ToolError("attribute access is not allowed")
    raise ToolError(f"unsupported syntax: {ast.unparse(node)!r} ({type(node).__name__})")


def _checked(value: object) -> int | float:
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, bool) or not isinstance(value, int | float):  # True is an int, but not a number
        raise ToolError(f"only numbers are allowed, not {type(value).__name__} {value!r}")
    if isinstance(value, int) and value.bit_length() > _MAX_RESULT_BITS:
        raise ToolError("result too large")
    return value
