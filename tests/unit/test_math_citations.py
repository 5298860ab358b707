"""Every citation of the math reference points at a page and heading that exist (as OpenDP checks its proof paths).

Code cites ``docs/math/<page>.md`` and, for a numbered subsection, ``docs/math/<page>.md §N.M``; the
docs link pages with relative Markdown links. A page that is renamed or a subsection renumbered
without updating its citations fails here. The repository must not cite documents outside it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATH = ROOT / "docs" / "math"
CITATION = re.compile(r"docs/math/(?P<page>[a-z0-9-]+)\.md(?: §(?P<section>\d+\.\d+))?")
#: The PTR theorem text serialised in every stored plan keeps its first citation (byte-identical plans).
LEGACY = re.compile(r"docs/math\.md section (?P<number>\d+)")
LINK = re.compile(r"\]\((?P<target>[^)#:\s]+\.md)(?:#[^)]*)?\)")
OUTSIDE = ("ALGORITHMS.md", "DESIGN.md", "STYLE.md", "ANCHORS.md", "shared/docs", "../shared", "shared/seeds")
#: The project's own pages that replaced them; a citation of one must name a page that exists.
OWN = re.compile(r"docs/(?P<page>[a-z0-9-]+)\.md(?! section)")  # the legacy PTR text: see LEGACY


def _sources() -> list[Path]:
    files = [
        p for d in ("src", "tests", "docs", "benchmarks", "examples") for p in (ROOT / d).rglob("*") if p.is_file()
    ]
    files.append(ROOT / "README.md")
    return [p for p in files if p.suffix in (".py", ".md") and p != Path(__file__).resolve()]


def _headings(page: Path) -> set[str]:
    return {m.group(1) for m in re.finditer(r"(?m)^#{2,4} (\d+\.\d+) ", page.read_text(encoding="utf-8"))}


def test_every_cited_page_and_section_exists() -> None:
    cited = 0
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            page = MATH / f"{m.group('page')}.md"
            assert page.is_file(), f"{path.relative_to(ROOT)} cites the missing page {page.relative_to(ROOT)}"
            if m.group("section"):
                assert m.group("section") in _headings(page), f"{path.relative_to(ROOT)} cites a missing {m.group(0)}"
            cited += 1
    assert cited > 100  # the code does cite its math


def test_the_legacy_citation_in_stored_plans_still_resolves() -> None:
    index = (MATH / "index.md").read_text(encoding="utf-8")
    for path in _sources():
        for m in LEGACY.finditer(path.read_text(encoding="utf-8")):
            number = m.group("number")
            listed = re.search(rf"(?m)^{number}\. \[[^\]]+\]\((?P<page>[a-z0-9-]+\.md)\)", index)
            assert listed and (MATH / listed.group("page")).is_file(), f"{path}: {m.group(0)} names no page"


def test_relative_links_between_docs_resolve() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        for m in LINK.finditer(page.read_text(encoding="utf-8")):
            target = (page.parent / m.group("target")).resolve()
            assert target.is_file(), f"{page.relative_to(ROOT)} links the missing {m.group('target')}"


def test_no_citation_leaves_the_repository() -> None:
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for outside in OUTSIDE:
            assert outside not in text, f"{path.relative_to(ROOT)} cites {outside}, outside the repository"


def test_every_cited_project_page_exists() -> None:
    cited = 0
    for path in _sources():
        for m in OWN.finditer(path.read_text(encoding="utf-8")):
            page = ROOT / "docs" / f"{m.group('page')}.md"
            assert page.is_file(), f"{path.relative_to(ROOT)} cites the missing page docs/{m.group('page')}.md"
            cited += 1
    assert cited > 10
