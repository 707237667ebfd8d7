"""The wiki's configuration (`wiki.yml` at the root, optional), where the root is, and the list
of its pages. Every command finds pages through `list_pages`."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pathspec
import yaml

from wikitools.core import locate
from wikitools.core.diagnostics import Diagnostic, Severity, yaml_problem
from wikitools.core.errors import ConfigError, UsageError
from wikitools.core.locate import (
    CONFIG_NAME,
    DEFAULT_DOCS,
    MKDOCS_NAME,
    OTHER_CONFIGS,
    mkdocs_file,
)
from wikitools.core.yamlload import load_yaml

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
    generator: str = "mkdocs"  # whose link rules the pages follow (`generators`)
    source: str | None = None  # the wiki.yml that was read, if any
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

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
    data = _read_yaml(path) if path.is_file() else {}
    exclude = _check_exclude(data)
    docs_dir = _docs_dir(root, data.get("docs_dir"), path)
    glossary = _glossary(root, docs_dir, data.get("glossary"))
    index = data.get("index") or {}
    if not isinstance(index, dict):
        raise ConfigError(f"{CONFIG_NAME}: 'index' must be a mapping")
    statuses = data.get("statuses", DEFAULT_STATUSES)
    if not isinstance(statuses, list | tuple) or not all(isinstance(s, str) for s in statuses):
        raise ConfigError(f"{CONFIG_NAME}: 'statuses' must be a list of strings")
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
        generator=_generator(root, docs_dir, data.get("generator")),
        source=CONFIG_NAME if path.is_file() else None,
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


def _check_exclude(data: dict[str, Any]) -> list[str]:
    """The exclude patterns, compiled once here: a bad one is a configuration error now, not
    at first use."""
    exclude = data.get("exclude", list(DEFAULT_EXCLUDE))
    if not isinstance(exclude, list | tuple) or not all(isinstance(s, str) for s in exclude):
        raise ConfigError(f"{CONFIG_NAME}: 'exclude' must be a list of glob patterns")
    _spec(tuple(exclude))
    return list(exclude)


_KNOWN = frozenset({"docs_dir", "glossary", "index", "statuses", "exclude", "generator"})


GENERATOR_NAMES = ("mkdocs", "sphinx", "docusaurus")  # whose link rules `pages/generators.py` has
_DOCUSAURUS = tuple(n for n in OTHER_CONFIGS if n.startswith("docusaurus."))


def detect_generator(root: Path, docs_dir: str) -> str:
    """The generator a tree is configured for: mkdocs.yml/mkdocs.yaml, a Docusaurus config at
    the top, a Sphinx `conf.py` in the docs folder (or its `source/`); else MkDocs' rules."""
    if mkdocs_file(str(root)):
        return "mkdocs"
    if any((root / name).is_file() for name in _DOCUSAURUS):
        return "docusaurus"
    docs = root / docs_dir
    if any((folder / "conf.py").is_file() for folder in (docs, docs / "source", root)):
        return "sphinx"
    return "mkdocs"


def _generator(root: Path, docs_dir: str, value: Any) -> str:
    """wiki.yml's `generator:` (whose link rules the pages follow), else what the tree's
    configuration files say."""
    if value is None:
        return detect_generator(root, docs_dir)
    if value not in GENERATOR_NAMES:
        raise ConfigError(f"{CONFIG_NAME}: generator must be one of "
                          f"{', '.join(GENERATOR_NAMES)}, not {value!r}")
    return str(value)


def _read_yaml(path: Path) -> dict[str, Any]:
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
    found = mkdocs_file(str(root))
    if found is None:
        return None
    path = Path(found)

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
    try:
        # Python's own regular expressions: pathspec would pick RE2 where it is installed (the
        # probes need it), and RE2 refuses a file name that is not UTF-8 instead of matching it.
        return pathspec.GitIgnoreSpec.from_lines(patterns, backend="simple")
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{CONFIG_NAME}: bad exclude pattern: {exc}") from None


def is_excluded(config: WikiConfig, rel: str) -> bool:
    """True when `rel` (POSIX, relative to root) matches an exclude pattern, tried against the
    path relative to the root and relative to docs_dir."""
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
    paths = tuple(Path(found[rel]) for rel in order)
    return PageFiles(paths, tuple(sorted(problems)), tuple(order))


def iter_pages(config: WikiConfig) -> list[Path]:
    """The page files of `list_pages`, without its warnings."""
    return list(list_pages(config).paths)
