"""Renders the C++ public headers' contracts without doxygen (which this project does not install).

``.. cpp-header:: ops/scatter/scatter.h`` (a path from the repository root) renders the header's opening
comment (its contract), then each top-level declaration in namespace scope with the comment block above it:
a group of declarations with no blank line between them is one entry, and a class, struct or enum is shown
whole, its members' comments included. ``namespace detail`` (implementation) is left out.

So that the page cannot rot, a warning (an error under ``sphinx -W``) is emitted when a listed header is
missing, has no contract comment, or when a header that the umbrella header ``scatterx.h`` includes is rendered
by no ``cpp-header`` directive (``cpp_headers_unlisted`` names the ones left out on purpose).
"""

from __future__ import annotations

import os
import re

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.util import logging

logger = logging.getLogger(__name__)

_NAMESPACE_OPEN = re.compile(r"^(inline\s+)?namespace\s*([A-Za-z_][\w:]*)?\s*\{\s*(//.*)?$")
_INCLUDE = re.compile(r'^#include\s+"([^"]+)"')


def _code(line: str) -> str:
    """The line without its // comment and string / character literals (for counting braces)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//", 1)[0]


def _comment_text(line: str) -> str:
    """`// text` -> `text`, keeping the indentation after the first space (lists, formulas)."""
    text = line.strip()[2:]
    return text[1:] if text.startswith(" ") else text


def parse_header(text: str):
    """(contract lines, [(comment lines, declaration lines)]) of one header."""
    lines = text.splitlines()
    i = 0
    contract = []
    while i < len(lines) and lines[i].strip().startswith("//"):
        contract.append(_comment_text(lines[i]))
        i += 1
    entries = []
    comment, decl = [], []
    depth = 0            # braces open inside the current declaration
    namespaces = []      # the namespaces open at this point (names; "" for anonymous)

    def close():
        nonlocal comment, decl
        if comment or decl:
            entries.append((comment, decl))
        comment, decl = [], []

    continued = False    # inside a #define's continuation lines
    for line in lines[i:]:
        s = line.strip()
        hidden = "detail" in namespaces
        if continued:
            continued = s.endswith("\\")
            if not hidden:
                decl.append(line)
            continue
        if depth > 0:
            if not hidden:
                decl.append(line)
            code = _code(line)
            depth += code.count("{") - code.count("}")
            continue
        match = _NAMESPACE_OPEN.match(s)
        if match:
            close()
            namespaces.append(match.group(2) or "")
            continue
        if s.startswith("}") and namespaces and not decl:
            close()
            namespaces.pop()
            continue
        if s.startswith("#define") and not hidden:  # a public macro is part of the API
            decl.append(line)
            continued = s.endswith("\\")
            continue
        if not s or s.startswith("#"):
            if not s:
                close()
            continue
        if hidden:  # still counted, so that the detail namespace's braces close where they should
            code = _code(line)
            depth += code.count("{") - code.count("}")
            continue
        if s.startswith("//"):
            if decl:  # a comment after declarations starts the next entry
                close()
            comment.append(_comment_text(line))
            continue
        decl.append(line)
        code = _code(line)
        depth += code.count("{") - code.count("}")
    close()
    return contract, [(c, d) for c, d in entries if d or c]


def _dedent(lines):
    width = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return [x[width:] for x in lines]


def _public_part(lines):
    """A class or struct without its private and protected sections (implementation, not contract)."""
    kept, hidden = [], False
    for line in lines:
        s = line.strip()
        if s in ("private:", "protected:"):
            hidden = True
            continue
        if s == "public:" or (s.startswith("}") and len(line) - len(line.lstrip()) == 0):
            hidden = False
        if not hidden:
            kept.append(line)
    while len(kept) > 1 and not kept[-2].strip():  # the blank line a dropped section leaves before "};"
        del kept[-2]
    return kept


def _prose(lines):
    """A comment as a line block: the author's line breaks and indentation kept, nothing parsed as markup."""
    block = nodes.line_block()
    for text in lines:
        stripped = text.lstrip(" ")
        line = nodes.line(text, stripped)
        line.indent = len(text) - len(stripped)
        if line.indent:
            inner = nodes.line_block()
            inner += line
            block += inner
        else:
            block += line
    return block


class CppHeader(Directive):
    """``.. cpp-header:: PATH``: one public header, its contract and its declarations."""

    required_arguments = 1
    option_spec = {"title": directives.unchanged}

    def run(self):
        env = self.state.document.settings.env
        rel = self.arguments[0]
        root = env.config.cpp_headers_root
        path = os.path.join(root, rel)
        env.note_dependency(os.path.abspath(path))
        if not hasattr(env, "cpp_headers_rendered"):
            env.cpp_headers_rendered = {}
        env.cpp_headers_rendered[rel] = env.docname
        section = nodes.section(ids=[nodes.make_id("header-" + rel)])
        section += nodes.title(rel, self.options.get("title", rel))
        if not os.path.isfile(path):
            logger.warning("cpp-header: %s is listed but does not exist (under %s)", rel, root,
                           location=(env.docname, self.lineno))
            return [section]
        with open(path, encoding="utf-8") as f:
            contract, entries = parse_header(f.read())
        if not contract:
            logger.warning("cpp-header: %s does not open with a contract comment", rel,
                           location=(env.docname, self.lineno))
        else:
            section += _prose(contract)
        for comment, decl in entries:
            if decl:
                code = "\n".join(_public_part(_dedent(decl)))
                block = nodes.literal_block(code, code)
                block["language"] = "cpp"
                section += block
            if comment:
                section += _prose(comment)
        return [section]


def _check_umbrella(app, env):
    """Every header the umbrella header includes is rendered (or named in cpp_headers_unlisted)."""
    rendered = getattr(env, "cpp_headers_rendered", {})
    umbrella = app.config.cpp_headers_umbrella
    path = os.path.join(app.config.cpp_headers_root, umbrella)
    if not os.path.isfile(path):
        logger.warning("cpp-header: the umbrella header %s does not exist", umbrella)
        return
    with open(path, encoding="utf-8") as f:
        included = [m.group(1) for m in map(_INCLUDE.match, f.read().splitlines()) if m]
    for header in [umbrella] + included:
        if header not in rendered and header not in app.config.cpp_headers_unlisted:
            logger.warning("cpp-header: %s (public: %s includes it) is rendered by no cpp-header directive",
                           header, umbrella)


def _merge(app, env, docnames, other):
    rendered = getattr(other, "cpp_headers_rendered", {})
    if not hasattr(env, "cpp_headers_rendered"):
        env.cpp_headers_rendered = {}
    env.cpp_headers_rendered.update(rendered)


def _purge(app, env, docname):
    rendered = getattr(env, "cpp_headers_rendered", {})
    for header in [h for h, d in rendered.items() if d == docname]:
        del rendered[header]


def setup(app):
    app.add_config_value("cpp_headers_root", "..", "env")
    app.add_config_value("cpp_headers_umbrella", "scatterx.h", "env")
    app.add_config_value("cpp_headers_unlisted", [], "env")
    app.add_directive("cpp-header", CppHeader)
    app.connect("env-check-consistency", _check_umbrella)
    app.connect("env-merge-info", _merge)
    app.connect("env-purge-doc", _purge)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
