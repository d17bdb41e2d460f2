"""The README stays a front page, and the documentation's links lead somewhere.

Issue 21: the README is what a newcomer reads first (under 200 lines); everything else is a page
in ``docs/``. A page moved or a heading renamed must not leave a link, a picture or an anchor
pointing at nothing, so every relative link in README.md and docs/*.md is resolved here: the
file (or folder) must exist, and an anchor must name a heading or an ``<a id>`` of its page.
The architecture page's state diagrams are held to ``runner.states``, so they cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

import pytest

from runner.states import RUN_TRANSITIONS, STEP_TRANSITIONS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
ARCHITECTURE = REPO / "docs" / "architecture.md"

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
# [text](target) and ![alt](target); the text may hold one level of brackets (an image in a link).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose(text: str) -> str:
    """The text a reader sees as Markdown: code blocks and code spans hold no links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline code and links reduced to their text, lower case,
    punctuation dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found: set[str] = set(EXPLICIT_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def relative_links(page: Path) -> list[str]:
    targets = LINK.findall(prose(page.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def test_the_readme_is_under_200_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines; move detail into a page in docs/"


def test_the_link_finder_sees_links_images_and_anchors() -> None:
    # The checker below passes vacuously if it finds nothing, so hold it to a sample.
    sample = (
        "See [setup](docs/setup.md#configuration), ![a picture](docs/pictures/status.png), `[not](a link)`."
    )
    assert LINK.findall(prose(sample)) == ["docs/setup.md#configuration", "docs/pictures/status.png"]
    assert slug("Health: is the bot doing its job?") == "health-is-the-bot-doing-its-job"
    assert slug("For staff: the live run message, status, the staff log") == (
        "for-staff-the-live-run-message-status-the-staff-log"
    )
    assert slug("`rehearse` in detail") == "rehearse-in-detail"


def test_the_readme_links_every_page_in_docs() -> None:
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in relative_links(README)}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"README.md links none of {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    links = relative_links(page)
    assert links, f"{page.name} links nothing: the link finder is broken, or the page is an island"
    broken = []
    for target in links:
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading or <a id> '{anchor}' in {destination.name}")
    assert not broken, f"{page.relative_to(REPO)}:\n" + "\n".join(broken)


def drawn_edges(heading: str) -> set[tuple[str, str]]:
    """The transitions the mermaid state diagram under ``heading`` draws, start and end left out."""
    section = ARCHITECTURE.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    diagram = re.search(r"```mermaid\nstateDiagram-v2\n(.*?)```", section, re.S)
    assert diagram, f"no state diagram under {heading!r}"
    edges = re.findall(r"^\s*(\S+)\s*-->\s*([^\s:]+)", diagram.group(1), re.M)
    return {(a, b) for a, b in edges if "[*]" not in (a, b)}


@pytest.mark.parametrize(
    ("heading", "transitions"),
    [("The run's state machine", RUN_TRANSITIONS), ("The step's state machine", STEP_TRANSITIONS)],
    ids=["run", "step"],
)
def test_the_architecture_page_draws_exactly_the_allowed_transitions(
    heading: str, transitions: Mapping[StrEnum, frozenset[StrEnum]]
) -> None:
    allowed = {(str(a), str(b)) for a, targets in transitions.items() for b in targets}
    drawn = drawn_edges(heading)
    assert drawn == allowed, (
        f"drawn but not allowed: {sorted(drawn - allowed)}; allowed but not drawn: {sorted(allowed - drawn)}"
    )
