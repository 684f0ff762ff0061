#!/usr/bin/env python3
"""The house rule on sizes: no library source file over 600 lines and no
library function over 80 lines (README "Layout"). Prints the offenders and
exits 1 when there are any.

    python3 scripts/check_sizes.py [ROOT]

Library sources: ops/, dist/ and python_bindings/src/ (*.h, *.cpp, *.cu,
*.cuh, *.in). A function is a brace block opened after a parameter list at
namespace or class scope (lambdas and local classes count toward the
function around them). Preprocessor lines, comments and string literals are
ignored when matching braces.
"""

import pathlib
import re
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
LIBRARY_DIRS = ("ops", "dist", "python_bindings/src")
SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".in")

_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#(?:\\\n|[^\n])*',
                    re.S | re.M)


def _blank(match):
    """The match with everything but its newlines turned into spaces."""
    return re.sub(r"[^\n]", " ", match.group(0))


def functions(text):
    """(name, first line, line count) of each function defined in C++ `text`."""
    code = _TOKEN.sub(_blank, text)
    found = []
    stack = []  # per open brace: (kind, first line, name)
    head_start = 0  # where the text before the next brace begins
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == ";":
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            if any(kind == "function" for kind, _, _ in stack):
                kind = "inner"
            elif re.search(r"\bnamespace\b|\bextern\s*$", head):
                kind = "scope"
            elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                kind = "scope"
            elif re.search(r"\)[\w\s]*:(?:[^{}]|\{[^{}]*\})*\w\s*$", head):
                kind = "member init"  # Foo() : x{1}, ... { : the braces of an initializer
            elif ")" in head and not re.search(r"=\s*$", head):
                kind = "function"
            else:
                kind = "other"
            name = ""
            if kind == "function":
                m = re.search(r"([~\w:<>]+)\s*\([^;]*$", head, re.S)
                name = m.group(1) if m else "?"
            stack.append((kind, line, name))
            if kind != "member init":
                head_start = i + 1
        elif c == "}":
            kind = ""
            if stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, line - first + 1))
            if kind != "member init":
                head_start = i + 1
    return found


def main(root):
    root = pathlib.Path(root)
    problems = []
    for d in LIBRARY_DIRS:
        for path in sorted((root / d).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            text = path.read_text(errors="replace")
            rel = path.relative_to(root)
            n = text.count("\n")
            if n > MAX_FILE_LINES:
                problems.append(f"{rel}: {n} lines (at most {MAX_FILE_LINES})")
            for name, first, length in functions(text):
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{first}: {name} is {length} lines (at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} over the size limits")
        return 1
    print("sizes: every library file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent))
