"""The wiki's configuration (`wiki.yml` at the root, optional), where the root is, and the list
of its pages. Every command finds pages through `list_pages`."""

from __future__ import annotations

import errno
import marshal
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitools.core import locate
from wikitools.core.diagnostics import Diagnostic, Severity, yaml_problem
from wikitools.core.errors import ConfigError, UsageError
from wikitools.core.locate import CONFIG_NAME, DEFAULT_DOCS, MKDOCS_NAME, blake2b

if TYPE_CHECKING:
    import pathspec


DEFAULT_STATUSES = ("measured", "reviewed", "experimental", "historical", "unverified")
# Gitignore-style patterns (as MkDocs' exclude_docs): a pattern without a slash matches a
# name at any depth, `dir/` a folder anywhere, a leading `/` anchors at the root.
DEFAULT_EXCLUDE = (
    "INDEX.md",
    "includes/",
    "snippets/",
    "_*.md",
    "site/",
    "node_modules/",
)


@dataclass(frozen=True, slots=True)
class Section:
    """An index section: a folder (POSIX, relative to docs_dir; "." for the top level)."""

    path: str
    title: str
    description: str = ""


@dataclass(frozen=True)
class WikiConfig:
    root: Path
    docs_dir: str = "."  # POSIX, relative to root
    glossary: str = "GLOSSARY.md"  # POSIX, relative to root
    index_output: str = "INDEX.md"
    index_generated: bool = True  # False: the index file is the maintainers' own page
    index_title: str = "Index"
    index_intro: str = ""
    sections: tuple[Section, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    source: str | None = None  # the wiki.yml that was read, if any
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Parsed wiki.yml and exclude decisions, kept between runs (see `_memo_file`).
    memo: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def docs_path(self) -> Path:
        return self.root / self.docs_dir

    @property
    def glossary_path(self) -> Path:
        return self.root / self.glossary

    @property
    def index_path(self) -> Path:
        return self.root / self.index_output

    @cached_property
    def exclude_spec(self) -> pathspec.GitIgnoreSpec:
        return _spec(self.exclude)


# --------------------------------------------------------------------------- the root


def find_root(start: Path) -> Path:
    """The wiki that `start` lies in: the nearest folder at or above it that holds wiki.yml or
    mkdocs.yml, else the top of its git repository (a wiki without a configuration).
    Outside any of these it is a ConfigError (exit 2)."""
    found = locate.find_root(str(start))
    if found is None:
        raise ConfigError(
            f"{start.resolve()}: not inside a wiki (no {CONFIG_NAME} or {MKDOCS_NAME} here or in "
            "a folder above, and no git repository); run from the wiki or name it with --root DIR"
        )
    return Path(found)


def is_wiki(folder: Path) -> bool:
    """A wiki's top folder (`locate.is_wiki`)."""
    return locate.is_wiki(str(folder))


def resolve_root(given: Path | None) -> Path:
    """--root as given, else the wiki around the working directory. A given root must be a
    wiki (`is_wiki`): `--root /` would read the whole file system."""
    if given is None:
        return find_root(Path.cwd())
    if not given.is_dir():
        raise ConfigError(f"{given}: --root is not a folder")
    if not is_wiki(given):
        raise UsageError(f"{given}: --root is not a wiki (no {CONFIG_NAME}, {MKDOCS_NAME}, "
                         f"{DEFAULT_DOCS}/ folder or GLOSSARY.md there); name the wiki's top "
                         "folder")
    return given.resolve()


# --------------------------------------------------------------------------- configuration


def load_config(root: Path) -> WikiConfig:
    """Read `wiki.yml` at `root` (optional) and fill in defaults. Without a wiki.yml the docs
    folder is mkdocs.yml's `docs_dir` when there is one, else the whole tree."""
    root = root.resolve()
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory")
    path = root / CONFIG_NAME
    data: dict[str, Any] = {}
    memo = _memo_load(root)
    if path.is_file():
        digest = blake2b(path.read_bytes(), digest_size=16).digest()
        cached = memo.get("yml")
        if cached and cached[0] == digest:
            data = cached[1]
        else:
            data = _read_yaml(path)
            _check_exclude(data, compile_them=True)
            memo["yml"] = (digest, data)
            _memo_save(root, memo)
    docs_dir = _docs_dir(root, data.get("docs_dir"), path)
    glossary = _glossary(root, docs_dir, data.get("glossary"))
    index = data.get("index") or {}
    if not isinstance(index, dict):
        raise ConfigError(f"{CONFIG_NAME}: 'index' must be a mapping")
    statuses = data.get("statuses", DEFAULT_STATUSES)
    if not isinstance(statuses, list | tuple) or not all(isinstance(s, str) for s in statuses):
        raise ConfigError(f"{CONFIG_NAME}: 'statuses' must be a list of strings")
    exclude = _check_exclude(data)
    output = str(index.get("output", "INDEX.md"))
    generated = index.get("generate", True)
    if not isinstance(generated, bool):
        raise ConfigError(f"{CONFIG_NAME}: index.generate must be true or false")
    return WikiConfig(
        root=root,
        docs_dir=docs_dir,
        glossary=glossary,
        index_output=output,
        index_generated=generated,
        index_title=str(index.get("title", "Index")),
        index_intro=" ".join(str(index.get("intro", "")).split()),
        sections=_sections(index.get("sections", [])),
        exclude=(*tuple(exclude), "/" + output) if generated else tuple(exclude),
        statuses=tuple(statuses),
        source=CONFIG_NAME if path.is_file() else None,
        extra={k: v for k, v in data.items() if k not in _KNOWN},
        memo=memo,
    )


def _check_exclude(data: dict[str, Any], *, compile_them: bool = False) -> list[str]:
    """The exclude patterns; with `compile_them` a bad one is a configuration error now, not
    at first use (done when wiki.yml is first read, not on every run)."""
    exclude = data.get("exclude", list(DEFAULT_EXCLUDE))
    if not isinstance(exclude, list | tuple) or not all(isinstance(s, str) for s in exclude):
        raise ConfigError(f"{CONFIG_NAME}: 'exclude' must be a list of glob patterns")
    if compile_them:
        _spec(tuple(exclude))
    return list(exclude)


# --------------------------------------------------------------------------- cache

def cache_dir() -> Path | None:
    """$WIKI_CACHE_DIR, else ~/.cache/wikitools; None when WIKI_CACHE_DIR=off."""
    found = locate.cache_dir()
    return None if found is None else Path(found)


def cache_file(root: Path, kind: str) -> Path | None:
    found = locate.cache_file(str(root), kind)
    return None if found is None else Path(found)


def _memo_load(root: Path) -> dict[str, Any]:
    """What an earlier run learnt of this wiki's configuration: wiki.yml parsed (so a warm
    run needs no YAML parser) and which paths the exclude patterns leave out (nor pathspec)."""
    path = cache_file(root, "config")
    try:
        data = marshal.loads(path.read_bytes()) if path else {}
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def _memo_save(root: Path, memo: dict[str, Any]) -> None:
    path = cache_file(root, "config")
    if path is None:
        return
    try:
        data = marshal.dumps(memo)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except (OSError, ValueError):
        pass  # a value marshal cannot store (a YAML date) or an unwritable cache: no memo


_KNOWN = frozenset({"docs_dir", "glossary", "index", "statuses", "exclude"})


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # here, not at the top: a warm run takes wiki.yml from the memo

    from wikitools.core.yamlload import load_yaml

    try:
        data = load_yaml(path.read_text(encoding="utf-8"), yaml.SafeLoader)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid UTF-8 ({exc.reason})") from None
    except yaml.YAMLError as exc:
        line, col, problem = yaml_problem(exc)
        where = f"{path.name}:{line + 1}:{col + 1}" if line is not None and col is not None else (
            path.name)
        raise ConfigError(f"{where}: malformed YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name}:1:1: must be a mapping of keys to values")
    return data


def mkdocs_docs_dir(root: Path) -> str | None:
    path = root / MKDOCS_NAME
    if not path.is_file():
        return None
    import yaml

    from wikitools.core.yamlload import load_yaml

    class _MkDocsLoader(yaml.SafeLoader):
        """mkdocs.yml may hold `!!python/name:` and `!ENV` tags; only `docs_dir` is read."""

    _MkDocsLoader.add_multi_constructor("", lambda _loader, _suffix, _node: None)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), _MkDocsLoader)
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        return None
    value = data.get("docs_dir", "docs") if isinstance(data, dict) else None
    return value if isinstance(value, str) and (root / value).is_dir() else None


def _docs_dir(root: Path, value: Any, path: Path) -> str:
    if value is None:
        value = mkdocs_docs_dir(root)
        if value is None:
            return "."
    if not isinstance(value, str) or not (root / value).is_dir():
        raise ConfigError(f"{path.name}: docs_dir {value!r} is not a folder under {root}")
    return Path(value).as_posix().strip("/") or "."


def _glossary(root: Path, docs_dir: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return Path(value).as_posix()
    folders = dict.fromkeys([docs_dir, ".", "wiki", "docs"])
    for folder in folders:
        prefix = f"{folder}/" if folder != "." else ""
        for name in ("glossary.md", "GLOSSARY.md"):
            if (root / f"{prefix}{name}").is_file():
                return f"{prefix}{name}"
    return "GLOSSARY.md"


def _sections(raw: Any) -> tuple[Section, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{CONFIG_NAME}: index.sections must be a list")
    out: list[Section] = []
    for item in raw:
        if not isinstance(item, dict) or "path" not in item:
            raise ConfigError(f"{CONFIG_NAME}: each index section needs a 'path' (got {item!r})")
        folder = Path(str(item["path"])).as_posix().strip("/") or "."
        title = str(item.get("title") or folder_title(folder))
        out.append(Section(folder, title, " ".join(str(item.get("description", "")).split())))
    return tuple(out)


def folder_title(folder: str) -> str:
    """`inference-engines` -> `Inference Engines`; keeps existing capitals (`vLLM`)."""
    name = folder.rsplit("/", 1)[-1]
    if name in (".", ""):
        return "Overview"
    words = re.split(r"[-_ ]+", name)
    return " ".join(w[:1].upper() + w[1:] for w in words if w)


# --------------------------------------------------------------------------- pages


def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    import pathspec

    try:
        # Python's own regular expressions: pathspec would pick RE2 where it is installed (the
        # probes need it), and RE2 refuses a file name that is not UTF-8 instead of matching it.
        return pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{CONFIG_NAME}: bad exclude pattern: {exc}") from None


def is_excluded(config: WikiConfig, rel: str) -> bool:
    """True when `rel` (POSIX, relative to root) matches an exclude pattern, tried against the
    path relative to the root and relative to docs_dir. Decisions are remembered per pattern
    list, so that pathspec is loaded only when a path is new."""
    key = (config.exclude, config.docs_dir)
    known: tuple[object, dict[str, bool]] | None = config.memo.get("excluded")
    if not known or known[0] != key:
        known = (key, {})
        config.memo["excluded"] = known
    decided = known[1].get(rel)
    if decided is None:
        decided = known[1][rel] = _excluded(config, rel)
        config.memo["dirty"] = True
    return decided


def _excluded(config: WikiConfig, rel: str) -> bool:
    spec = config.exclude_spec
    if spec.match_file(rel):
        return True
    prefix = config.docs_dir + "/"
    return config.docs_dir != "." and rel.startswith(prefix) and spec.match_file(rel[len(prefix) :])


@dataclass(frozen=True, slots=True)
class PageFiles:
    """The wiki's page files in path order, and warnings about `.md` entries left out."""

    paths: tuple[Path, ...]
    problems: tuple[Diagnostic, ...]
    rels: tuple[str, ...] = ()  # each path relative to the root, POSIX

    def __post_init__(self) -> None:
        if len(self.rels) != len(self.paths):
            raise ValueError("PageFiles: one relative path per path")


# The codes of page files left out unread (check_file): broken, looping or outward links,
# files that are not regular.
PAGE_FILE_CODES = frozenset({"PG004", "PG005"})


def _skip(rel: str, code: str, message: str) -> Diagnostic:
    return Diagnostic(rel, 1, 1, code, message, Severity.WARNING)


def check_file(path: Path | str, root: Path, rel: str | None = None) -> Diagnostic | None:
    """None when `path` is a regular file inside `root` that may be read; else a located
    warning saying why it is left out. Nothing is opened: a FIFO would block."""
    if rel is None:
        rel = Path(path).relative_to(root).as_posix()
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
        mode = os.stat(path).st_mode  # noqa: PTH116 (a str path: no Path objects per file)
    except FileNotFoundError:
        return _skip(rel, "PG004", "broken symbolic link (its target does not exist); skipped")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _skip(rel, "PG004", "symbolic link that loops back on itself; skipped")
        return _skip(rel, "PG004", f"cannot read ({exc.strerror}); skipped")
    if not stat.S_ISREG(mode):
        return _skip(rel, "PG004", "not a regular file (a FIFO, device or folder); skipped")
    if link:
        target = Path(path).resolve()
        if not target.is_relative_to(root.resolve()):
            return _skip(
                rel, "PG005", f"symbolic link to {target}, outside the repository; not read"
            )
    return None


def list_pages(config: WikiConfig) -> PageFiles:
    """Every Markdown page of the wiki (sorted; excludes applied) plus the root README.md, and
    PG004/PG005 warnings for broken links, non-regular files and links leaving the tree."""
    found: dict[str, str] = {}
    problems: list[Diagnostic] = []
    root = config.root

    def consider(path: str, rel: str) -> None:
        if is_excluded(config, rel):
            return
        problem = check_file(path, root, rel)
        if problem is None:
            found[rel] = path
        else:
            problems.append(problem)

    top = str(root)
    for path, rel in locate.markdown_files(str(config.docs_path), top):
        consider(path, rel)
    readme = os.path.join(top, "README.md")  # noqa: PTH118
    if "README.md" not in found and os.path.lexists(readme):
        consider(readme, "README.md")
    order = sorted(found)
    if config.memo.pop("dirty", False):
        _memo_save(root, config.memo)
    paths = tuple(Path(found[rel]) for rel in order)
    return PageFiles(paths, tuple(sorted(problems)), tuple(order))


def iter_pages(config: WikiConfig) -> list[Path]:
    """The page files of `list_pages`, without its warnings."""
    return list(list_pages(config).paths)
