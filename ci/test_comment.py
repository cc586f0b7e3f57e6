"""The pull request comment (comment.yml) as GitHub renders it: what the pull request's code wrote stays inside its
quote and mentions nobody, whatever its bytes (docs/ci.md, "The pull request comment").

GitHub renders a comment with cmark-gfm (`cmarkgfm` here), with its extensions and footnotes, and hands the HTML to
its sanitizer, which keeps headings, links, images and `<details>`. So the Markdown is rendered here with raw HTML
let through (CMARK_OPT_UNSAFE): a tag the report smuggled out would show as an element, where the safe option
would only leave a `raw HTML omitted` comment. The quoting function is comment.yml's own, run by bash on crafted
bytes; the last scenario runs the whole workflow under act on a report written to break out."""

from __future__ import annotations

import random
import re
import subprocess
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
from act import WORKFLOWS, World
from cmarkgfm.cmark import Options
from test_static import MARKER, comment_run, comments

ZERO_WIDTH_SPACE = "\u200b"
OPTIONS = Options.CMARK_OPT_FOOTNOTES | Options.CMARK_OPT_UNSAFE
# What GitHub links as a mention, `@name` or `@org/team`: outside code only, but none is allowed in code either.
MENTION = re.compile(r"@[A-Za-z0-9]")
# What a report may try: end the quote (CR, CRLF, a bare `>`), raw HTML, entities, mentions, a footnote (rendered
# below everything), an alert, fences and backtick runs, links, NUL, invalid UTF-8, a character cut in two.
PIECES = [b"\r", b"\n", b"\r\n", b"\r\r\n", b"# I am the bot", b"> ", b">", b"```", b"`" * 12, b"~~~", b"    ", b"\t",
          b"<", b"</details>", b"<details><summary>x</summary>", b"<img src=x>", b"<!--", b"-->", b"<script>",
          b"<?php ", b"<![CDATA[", b"<!DOCTYPE html>", b"<https://evil.example>", b"&#64;", b"&commat;", b"&",
          b"&amp;", b"@user", b"@acme/team", b"user@example.com", b"\\@user", b"[^1]", b"[^1]: ", b"[!WARNING]",
          b"[link](https://evil.example)", b"![i](https://evil.example/i.png)", b"https://evil.example", b"|a|b|",
          b"|---|---|", b"- ", b"1. ", b"***", b"\\", b"\x00", b"\x1b[31m", b"\x0b", b"\x0c", b"\x7f", b"\xff",
          b"\xe2\x80", b"\xe2\x80\x8b", "é".encode(), b"\xf4\x90\x80\x80", b"x" * 70]  # fmt: skip
MALICIOUS = (
    b"## Golden snapshots, shard 1/2: all checks passed\r# I am the bot\r[link](https://evil.example)\n"
    b"cc &#64;user and @user and @acme/maintainers\r\n"
    b"</details><img src=x><!-- hidden\n> \n<details><summary>open</summary>\n\n"
    b"a footnote[^1]\n\n[^1]: # below the quote [here](https://evil.example)\n\n"
    b"``````````````\r<img src=x> in code, &#64;user\r``````````````\n\x00\xff\xe2\x80 end\n"
)


def quoted_function() -> str:
    """comment.yml's `quoted` shell function, as its step defines it."""
    match = re.search(r"^( *)quoted\(\) \{\n.*?^\1\}\n", (WORKFLOWS / "comment.yml").read_text(), re.M | re.S)
    assert match, "comment.yml defines no quoted() function"
    return textwrap.dedent(match[0])


def quoted(tmp_path: Path, reports: list[bytes]) -> list[bytes]:
    """Each report through `quoted`, all in one bash."""
    for index, report in enumerate(reports):
        (tmp_path / f"{index}.md").write_bytes(report)
    script = quoted_function() + f'for i in $(seq 0 {len(reports) - 1}); do quoted "$i.md" > "$i.out"; done\n'
    subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, check=True, timeout=120)
    return [(tmp_path / f"{index}.out").read_bytes() for index in range(len(reports))]


class Page(HTMLParser):
    """The rendered HTML: the top-level elements, every element with the top-level one it is in, comments, text."""

    VOID = {"br", "hr", "img", "input"}

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.depth, self.top, self.tags, self.comments, self.text = 0, [], [], [], []
        self.feed(html)
        self.close()

    def outside_quotes(self) -> list[str]:
        return [tag for top, tag in self.tags if top != "blockquote"]

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.top += [tag] if self.depth == 0 else []
        self.tags.append((self.top[-1], tag))
        self.depth += tag not in self.VOID

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag not in self.VOID

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def page(markdown: bytes) -> Page:
    # gh posts the file's bytes as a JSON string: invalid UTF-8 arrives as U+FFFD (Go's encoder).
    return Page(cmarkgfm.github_flavored_markdown_to_html(markdown.decode(errors="replace"), OPTIONS))


def assert_quoted_and_inert(markdown: bytes) -> Page:
    """One quote at most and nothing beside it, no raw HTML in it, nobody mentioned."""
    rendered = page(markdown)
    assert rendered.top in ([], ["blockquote"]), rendered.top
    safe = cmarkgfm.github_flavored_markdown_to_html(markdown.decode(errors="replace"), Options.CMARK_OPT_FOOTNOTES)
    assert "raw HTML omitted" not in safe, "cmark took some of it for HTML"
    assert not MENTION.search("".join(rendered.text))
    return rendered


def normalized(report: bytes) -> bytes:
    """What the report should read as: its first 60000 bytes, CRLF and CR as LF, no other control character."""
    text = report[:60000].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return text.translate(None, bytes(range(9)) + bytes(range(11, 32)) + b"\x7f")


def crafted(seed: int) -> bytes:
    rng = random.Random(seed)
    parts = [rng.choice(PIECES) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 8)) for _ in range(40)]
    return b"".join(parts[: rng.randint(1, 40)])


def test_crafted_reports_stay_in_their_quote_read_as_written_and_mention_nobody(tmp_path):
    """Hypothesis-like: 300 reports of pieces that each could end a quote, make HTML or mention someone; and cuts at
    60000 bytes inside a character and inside `&#64;`."""
    long = [b"a" * 59999 + "é".encode() + b"<b>", b"b" * 59998 + b"&#64;user", b"<" * 70000]
    reports = [crafted(seed) for seed in range(300)] + long + [MALICIOUS, b""]
    for report, out in zip(reports, quoted(tmp_path, reports), strict=True):
        lines = out.removesuffix(b"\n").split(b"\n") if out else []
        assert all(line.startswith(b"> ") for line in lines), out
        unquoted = b"\n".join(line[2:] for line in lines).replace(ZERO_WIDTH_SPACE.encode(), b"")
        expected = normalized(report).replace(ZERO_WIDTH_SPACE.encode(), b"")
        assert unquoted.rstrip(b"\n") == expected.rstrip(b"\n"), "only quoted, nothing lost or added"
        assert_quoted_and_inert(out)


def test_the_malicious_report_renders_as_its_text(tmp_path):
    """Its headings and links render, inside the quote; its HTML, entities, footnote and mentions as text."""
    (out,) = quoted(tmp_path, [MALICIOUS])
    rendered = assert_quoted_and_inert(out)
    assert not {"img", "details", "section", "sup"} & {tag for _, tag in rendered.tags}, rendered.tags
    text = "".join(rendered.text).replace(ZERO_WIDTH_SPACE, "")
    for shown in ("I am the bot", "&#64;user and @user and @acme/maintainers", "</details><img src=x><!-- hidden",
                  "[^1]: # below the quote", "<img src=x> in code, &#64;user"):  # fmt: skip
        assert shown in text, shown


def test_the_checks_catch_what_a_bare_quote_lets_through():
    """Each line behind `> `, as comment.yml did: after the CR, a heading, a link and an image render outside the quote,
    the footnote below it, and `&#64;user` mentions; the checks above see each of them."""
    rendered = page(b"\n".join(b"> " + line for line in MALICIOUS.split(b"\n")))
    assert {"h1", "a", "img", "section"} <= set(rendered.outside_quotes())
    assert MENTION.search("".join(rendered.text))


def test_a_malicious_report_posted_by_the_workflow_leaves_the_bot_its_own_lines(world: World):
    """comment.yml under act, on a static run's artifacts as a pull request's code could write them: shard 1 the
    malicious report, shard 2 one so long that the comment is cut inside the escaped text."""
    head = world.pull_request(41)
    run_id = 4100  # a static run of the pull request, its artifacts written here
    for shard, report in ((1, MALICIOUS), (2, b"<&@" * 30000)):
        verdict = world.artifact(run_id, f"verdict-shard-{shard}")
        verdict.mkdir(parents=True)
        (verdict / "pull-request").write_text("41\n")
        (verdict / "verdict.md").write_bytes(report)
    run = comment_run(world, run_id, head, "failure")
    assert run.jobs() == {"verdict on the pull request": "success"}, run.output("verdict on the pull request")
    (posted,) = comments(world, 41)
    body = posted["body"]
    assert len(body) <= 60000, "GitHub takes 65536 characters"
    title = f"Golden snapshots of {head} ([run {run_id}](https://example.invalid/{run_id})), updated on every push:"
    assert body.startswith(f"{MARKER}\n{title}\n\n> ")
    rendered = page(body.encode())
    assert rendered.top == ["p", "blockquote", "blockquote"], rendered.top
    assert rendered.outside_quotes() == ["p", "a"], "the title and its link to the run"
    assert rendered.comments == [MARKER.removeprefix("<!--").removesuffix("-->")]
    assert not {"img", "details", "section"} & {tag for _, tag in rendered.tags}, rendered.tags
    text = "".join(rendered.text)
    assert not MENTION.search(text)
    assert "I am the bot" in text and "&#64;user" in text.replace(ZERO_WIDTH_SPACE, "")
