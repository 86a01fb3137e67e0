#!/usr/bin/env python3
"""Check the internal links of the book and of README.md.

Scans book/src/**/*.md and README.md for markdown links `[text](target)` (and images) whose
target has no URL scheme, and checks that the target file or folder exists relative to the
linking file (an `#anchor` after the path is ignored; links that are only `#anchor` are
skipped). Also checks that every page SUMMARY.md lists exists and that every .md file in
book/src is listed in SUMMARY.md. Code (fenced blocks, indented blocks, inline code spans) is
not scanned. Exits 1 with the list of problems, 0 when there are none.

Standard library only: python3 book/check_links.py [repository root]
"""
import os
import re
import sys

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)


def strip_code(text):
    """The text with code blocks and inline code replaced by blank space (line numbers kept)."""
    out = []
    fence = None
    prev_blank = True
    in_indented = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            out.append("")
            continue
        m = re.match(r"(```+|~~~+)", stripped)
        if m and len(line) - len(stripped) < 4:
            fence = m.group(1)
            out.append("")
            continue
        is_indented = line.startswith("    ") or line.startswith("\t")
        if is_indented and (prev_blank or in_indented) and not _in_list(out):
            in_indented = True
            out.append("")
            continue
        if line.strip():
            in_indented = False
        prev_blank = not line.strip()
        out.append(line)
    return INLINE_CODE.sub(lambda m: " " * len(m.group(0)), "\n".join(out))


def _in_list(previous):
    """Whether the last non-blank kept line is a list item or its continuation."""
    for line in reversed(previous):
        if line.strip():
            return bool(re.match(r"\s*([-*+]|\d+[.)])\s", line)) or line.startswith("  ")
    return False


def links(path):
    text = strip_code(open(path, encoding="utf-8").read())
    for lineno, line in enumerate(text.split("\n"), 1):
        for m in LINK.finditer(line):
            target = m.group(1).strip("<>")
            yield lineno, target


def check_file(path, problems):
    base = os.path.dirname(path)
    for lineno, target in links(path):
        if not target or target.startswith("#") or SCHEME.match(target):
            continue
        file_part = target.split("#", 1)[0].split("?", 1)[0]
        if not file_part:
            continue
        if file_part.startswith("/"):
            problems.append(f"{path}:{lineno}: absolute link {target}")
            continue
        resolved = os.path.normpath(os.path.join(base, file_part))
        if not os.path.exists(resolved):
            problems.append(f"{path}:{lineno}: broken link {target} (no {resolved})")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.normpath(root)
    os.chdir(root)
    src = os.path.join("book", "src")
    problems = []

    pages = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".md"):
                pages.append(os.path.normpath(os.path.join(dirpath, name)))
    for path in pages + ["README.md"]:
        check_file(path, problems)

    summary = os.path.join(src, "SUMMARY.md")
    if not os.path.exists(summary):
        problems.append(f"{summary}: missing")
    else:
        listed = set()
        for lineno, target in links(summary):
            if not target or SCHEME.match(target):
                continue
            file_part = target.split("#", 1)[0]
            resolved = os.path.normpath(os.path.join(src, file_part))
            if not os.path.isfile(resolved):
                problems.append(f"{summary}:{lineno}: listed page {target} does not exist")
            listed.add(resolved)
        for page in pages:
            if page != summary and page not in listed:
                problems.append(f"{page}: not listed in {summary}")

    if problems:
        print(f"{len(problems)} link problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"links ok: {len(pages)} book pages and README.md checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
