"""The answer of `wiki index` (the index text, the findings as printed, the exit status) and a
record of it, so that a later run whose inputs are all as this run found them gives the same
answer again without listing, reading or parsing a page, and without importing the parser.

A run notes its inputs before it reads them (`Watch`): the Python, the folder of the installed
packages (its mtime moves with every install), the code of wikitools, the bytes of wiki.yml and
mkdocs.yml, every Markdown file under the docs folder with its lstat (mode, inode, device,
size, mtime, ctime; the index file itself is compared by its bytes instead). The record is kept
only when no page was changed less than a clock tick's worth before the run began (a change
within the same tick of the file system's clock could otherwise go unseen), no page is a
symbolic link or another kind of file, and the index is generated. A later run uses it only
when all of these are equal again and the index file holds exactly the recorded text; on any
other difference or doubt (an unreadable record, an option written in a way this module does
not read) the command does the whole work, which writes a new record. The record never holds
anything but an answer that the whole work gave.

Standard library only (os, sys, marshal): with `locate`, this is all that a warm run imports.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import time

from wikitools.core import locate
from wikitools.core.locate import CONFIG_NAME, MKDOCS_NAME, blake2b

FORMAT = 1
# Code that decides the answer besides the package's top-level modules (all of which count).
CODE = ("commands/__init__.py", "commands/index.py", "runbook/blocks/regions.py")
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# A change made after a run began carries a time stamp no earlier than this much before it
# began: a few clock ticks where stamps have nanoseconds, two seconds where they are whole
# seconds (FAT keeps two).
_FINE_SLACK_NS = 100_000_000
_COARSE_SLACK_NS = 2_000_000_000

Stat = tuple[int, int, int, int, int, int]
Key = tuple[int, str, str, str, int, str]
Files = dict[str, "Stat | None"]


class IndexAnswer:
    """A worked-out index: its text, the findings as printed, whether one of them is an error,
    their summary line, and how many pages it lists."""

    __slots__ = ("count", "failed", "lines", "summary", "text")

    def __init__(self, text: str, lines: tuple[str, ...], failed: bool, summary: str,
                 count: int) -> None:
        self.text = text
        self.lines = lines
        self.failed = failed
        self.summary = summary
        self.count = count

    def dump(self) -> tuple[str, tuple[str, ...], bool, str, int]:
        return (self.text, self.lines, self.failed, self.summary, self.count)


class Options:
    """What the command line of `wiki index` asks for."""

    __slots__ = ("check", "diff", "root", "stdout")

    def __init__(self, root: str | None, stdout: bool, check: bool, diff: bool) -> None:
        self.root = root
        self.stdout = stdout
        self.check = check
        self.diff = diff


def read_options(argv: list[str]) -> Options | None:
    """The options of `wiki index` when written plainly (`--root DIR` or `--root=DIR`,
    `--stdout`, `--check`, `--diff`, each at most once); None for anything else (help, an
    abbreviation, a conflict, an unknown word), which argparse then reads as it always does."""
    root: str | None = None
    flags: set[str] = set()
    words = iter(argv)
    for word in words:
        if word in ("--stdout", "--check", "--diff") and word not in flags:
            flags.add(word)
        elif word == "--root" and root is None:
            root = next(words, "")
            if not root or root.startswith("-"):
                return None
        elif word.startswith("--root=") and root is None and len(word) > len("--root="):
            root = word[len("--root="):]
        else:
            return None
    if "--stdout" in flags and "--check" in flags:
        return None
    return Options(root, "--stdout" in flags, "--check" in flags, "--diff" in flags)


def wiki_root(given: str | None) -> str | None:
    """The real path of the wiki that `--root` names or that the working directory lies in, as
    `config.resolve_root` finds it; None where that would be an error."""
    if given is None:
        return locate.find_root(os.getcwd())
    if not os.path.isdir(given) or not locate.is_wiki(given):
        return None
    return os.path.realpath(given)


# --------------------------------------------------------------------------- what is compared


def python_key() -> Key | None:
    """The Python, the folder of its installed packages (found where the parser is) with its
    mtime, and a digest of the code of wikitools; None without the parser."""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("markdown_it_pyrs")
    places = spec.submodule_search_locations if spec is not None else None
    if not places:
        return None
    packages = os.path.dirname(os.path.abspath(places[0]))
    digest = blake2b(digest_size=16)
    names = sorted(n for n in os.listdir(_PACKAGE) if n.endswith(".py"))
    for name in (*names, *CODE):
        with open(os.path.join(_PACKAGE, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return (FORMAT, sys.version, sys.prefix, packages, os.stat(packages).st_mtime_ns,
            digest.hexdigest())


def _config_digests(root: str) -> tuple[bytes | None, ...]:
    out: list[bytes | None] = []
    for name in (CONFIG_NAME, MKDOCS_NAME):
        try:
            with open(os.path.join(root, name), "rb") as f:
                out.append(blake2b(f.read(), digest_size=16).digest())
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


def _stat(path: str) -> Stat:
    st = os.lstat(path)
    return (st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _files(root: str, docs: str, output: str) -> Files:
    """Every Markdown file that listing the pages looks at, with its lstat (None for the index
    file itself), as `config.list_pages` walks: the docs folder, then the root README.md."""
    found: Files = {}
    for path, rel in locate.markdown_files(docs, root):
        found[rel] = None if rel == output else _stat(path)
    readme = os.path.join(root, "README.md")
    if "README.md" not in found and os.path.lexists(readme):
        found["README.md"] = _stat(readme)
    return found


# --------------------------------------------------------------------------- the record


class Watch:
    """What one run of `wiki index` reads, noted before it reads it: `Watch(root)` before the
    configuration is loaded, `pages(...)` before the pages are listed, `keep(answer)` at the
    end. Anything changed while the run read it then differs from the note, or is too recent
    for the note to be kept."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.started = time.time_ns()
        self.key: Key | None = None
        self.configs: tuple[bytes | None, ...] | None = None
        try:
            self.key = python_key()
            self.configs = _config_digests(root)
        except (OSError, ValueError, ImportError):
            pass  # no record then: the run itself goes on
        self.where: tuple[str, str] | None = None
        self.files: Files | None = None

    def pages(self, docs: str, output: str) -> None:
        self.where = (docs, output)
        try:
            self.files = _files(self.root, docs, output)
        except OSError:
            self.files = None

    def _trusted(self) -> bool:
        if self.key is None or self.configs is None or self.files is None:
            return False
        for st in self.files.values():
            if st is None:
                continue
            if not stat.S_ISREG(st[0]):
                return False
            newest = max(st[4], st[5])
            slack = _COARSE_SLACK_NS if newest % 1_000_000_000 == 0 else _FINE_SLACK_NS
            if newest >= self.started - slack:
                return False
        return True

    def keep(self, answer: IndexAnswer, usable: bool) -> None:
        """Write the record of `answer` (remove an older one when this run's cannot be kept:
        `usable` false, or the inputs too recent to trust their time stamps)."""
        path = locate.cache_file(self.root, "index")
        if path is None:
            return
        try:
            if not (usable and self._trusted()):
                if os.path.lexists(path):
                    os.unlink(path)
                return
            data = marshal.dumps((self.key, self.root, self.where, self.configs, self.files,
                                  answer.dump()))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except (OSError, ValueError):
            pass  # a record that cannot be written only costs time


def recorded(options: Options) -> tuple[IndexAnswer, str, str] | None:
    """(answer, root, index file relative to it) of the last run when everything it read is
    unchanged and the index file holds its text; None otherwise."""
    root = wiki_root(options.root)
    path = locate.cache_file(root, "index") if root is not None else None
    if root is None or path is None:
        return None
    try:
        with open(path, "rb") as f:
            record = marshal.load(f)
        key, at, where, configs, files, dumped = record
        docs, output = where
        if at != root or key != python_key() or configs != _config_digests(root):
            return None
        if files != _files(root, docs, output):
            return None
        answer = IndexAnswer(*dumped)
        with open(os.path.join(root, output), "rb") as f:
            if f.read() != answer.text.encode("utf-8"):
                return None
    except (OSError, ValueError, TypeError, EOFError, UnicodeError, ImportError):
        return None
    return answer, root, output
