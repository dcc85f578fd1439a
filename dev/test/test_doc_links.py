"""Every relative link and image of the repository's Markdown files points to a file or folder that exists, and
every '#anchor' into a Markdown file names one of its headings (GitHub's heading ids), so that a moved script or a
renamed section cannot leave the README's claims pointing nowhere. Every code span outside code blocks that names a
repository path (`dev/test/resume_test.sh`, `llmc/checkpoint.h:470`, `docs/adahop.md#the-format`) names a file or
folder git tracks: see code_span_path for which spans count. Self-checks first: a synthetic page with one broken
link and one bad anchor, and one with one code span naming a missing file, must be reported, and nothing else on
them.

usage: python3 dev/test/test_doc_links.py [FILE.md ...]   (default: every Markdown file git tracks)"""
import functools
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, summary  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL_LINK = re.compile(r"\[[^\]]*\]\(\s*<?[a-z][a-z0-9+.-]*:[^)]*\)", re.I)
# generated output (build products, run folders), never in the tree; a span under one of these is not checked
GENERATED = ("build/", "runs/")


def prose_lines(text):
    """(line number, line) for the lines of a Markdown text outside fenced code blocks, code spans replaced by their
    text in quotes"""
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, CODE_SPAN.sub(lambda m: '"' + m.group(2).replace("](", "] (") + '"', line)


def heading_id(title, seen):
    """GitHub's id of a heading: its text without links' targets, lowercased, characters other than letters,
    digits, '_', '-' and spaces dropped, spaces turned into '-'; a repeated id gets -1, -2, ..."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).lower()
    slug = "".join(c for c in text if c.isalnum() or c in "_- ").replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


@functools.lru_cache(maxsize=None)
def anchors_of(path):
    """the heading ids of a Markdown file"""
    seen = {}
    with open(path, encoding="utf-8") as f:
        return {heading_id(m.group(2), seen) for _, line in prose_lines(f.read()) if (m := HEADING.match(line))}


def broken_links(md_path):
    """(line number, target, why) for each relative link of a Markdown file that points nowhere"""
    with open(md_path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for number, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(os.path.dirname(md_path), file_part)) if file_part else md_path
            if not os.path.exists(path):
                problems.append((number, target, "no such file or folder"))
            elif anchor and path.endswith(".md") and anchor not in anchors_of(path):
                problems.append((number, target, f"no heading with id '{anchor}' in {os.path.relpath(path, REPO)}"))
    return problems


@functools.lru_cache(maxsize=None)
def git_tree():
    """(the files git tracks, the folders above them, the top-level names) of the repository"""
    out = subprocess.run(["git", "-C", REPO, "ls-files"], capture_output=True, text=True, check=True).stdout
    files = set(out.split("\n")) - {""}
    folders = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    return files, folders, {f.split("/")[0] for f in files}


def code_span_path(span):
    """the repository path a code span names, or None where it names none: a span counts when it has a '/' and no
    spaces, and its first component is a top-level file or folder of the tree (dev/, llmc/, scripts/, ...); a leading
    './', a trailing ':<line>' (or ':<line>-<line>') and a '#anchor' are dropped; globs and placeholders (any of
    '*?[]{}<>$'), flags (a leading '-') and generated output (build/, runs/) are not checked"""
    text = span.strip()
    if not text or " " in text or "/" not in text or text.startswith("-"):
        return None
    if text.startswith("./"):
        text = text[2:]
    text = re.sub(r"#.*$", "", text)
    text = re.sub(r":\d+(-\d+)?$", "", text)
    if any(c in text for c in "*?[]{}<>$") or text.startswith(GENERATED):
        return None
    if text.split("/")[0] not in git_tree()[2]:
        return None
    return text.rstrip("/")


def broken_code_paths(md_path):
    """(line number, code span, why) for each code span of a Markdown file, outside code blocks and outside the text
    of links to other sites (which name files of other repositories), that names a repository path git does not
    track"""
    files, folders, _ = git_tree()
    with open(md_path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if inside:
            continue
        for m in CODE_SPAN.finditer(EXTERNAL_LINK.sub("", line)):
            path = code_span_path(m.group(2))
            if path is not None and path not in files and path not in folders:
                problems.append((number, m.group(2), "not a file or folder of the git tree"))
    return problems


def self_check_code_paths():
    """the checker reports the one code span of a synthetic page that names a missing repository file, and only it"""
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "page.md")
        with open(page, "w") as f:
            f.write("# Page\n`dev/test/test_doc_links.py`, `llmc/checkpoint.h:470`, `./dev/test/`, `docs/adahop.md#x`\n"
                    "`dev/test/no_such_test.sh` and `./train_gpt2_adahop -h`, `train_gpt2.c`, `-o runs/d12`\n"
                    "`build/test_kernels`, `runs/d12/main.log`, `llmc/*.cuh`, `dev/<name>.py`, `nowhere/x.c`, `a/b`\n"
                    "[`dev/data/tinyshakespeare.py`](https://github.com/karpathy/llm.c) `llama:d8/d12`\n"
                    "```\n`dev/in_a_code_block.py`\n```\n")
        found = [(n, t) for n, t, _ in broken_code_paths(page)]
    expected = [(3, "dev/test/no_such_test.sh")]
    check(found == expected, "self-check: a code span naming a missing repository file is reported, nothing else",
          f"found {found}, expected {expected}")


def self_check():
    """the checker reports a broken link and a bad anchor of a synthetic page, and only those"""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "other.md"), "w") as f:
            f.write("# Title\n\n## The LM head in low precision (`-H 1`)\n\n## Title\n")
        page = os.path.join(tmp, "page.md")
        with open(page, "w") as f:
            f.write("# Page\n[ok](other.md) [ok anchor](other.md#the-lm-head-in-low-precision--h-1)\n"
                    "[repeated](other.md#title-1) [self](#page) [folder](.) ![web](https://example.com/x.png)\n"
                    "[broken](missing.md) and [bad anchor](other.md#no-such-heading)\n"
                    "```\n[in a code block](nowhere.md)\n```\n`[in a code span](nowhere.md)`\n")
        found = [(n, t) for n, t, _ in broken_links(page)]
    expected = [(4, "missing.md"), (4, "other.md#no-such-heading")]
    check(found == expected, "self-check: a broken link and a bad anchor are reported, nothing else",
          f"found {found}, expected {expected}")


def tracked_markdown():
    """the absolute paths of the Markdown files git tracks"""
    out = subprocess.run(["git", "-C", REPO, "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout
    return [os.path.join(REPO, p) for p in out.split()]


def main():
    self_check()
    self_check_code_paths()
    files = [os.path.abspath(p) for p in sys.argv[1:]] or tracked_markdown()
    check(len(files) > 0, "Markdown files to check were found")
    for md in files:
        problems = broken_links(md)
        check(not problems, f"links of {os.path.relpath(md, REPO)}",
              "\n     ".join(f"line {n}: {t}: {why}" for n, t, why in problems))
        problems = broken_code_paths(md)
        check(not problems, f"code-span paths of {os.path.relpath(md, REPO)}",
              "\n     ".join(f"line {n}: `{t}`: {why}" for n, t, why in problems))
    return summary("test_doc_links")


if __name__ == "__main__":
    sys.exit(main())
