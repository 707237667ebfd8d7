"""The wiki's configuration (`wiki.yml` at the root, optional) and the list of its pages.
Every command finds pages through `iter_pages` and reads them once through `load_pages`."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from wikitools import pages as pages_module
from wikitools.errors import ConfigError
from wikitools.pages import Page, read_page

CONFIG_NAME = "wiki.yml"
DEFAULT_STATUSES = ("current", "experimental", "historical", "unverified")
DEFAULT_EXCLUDE = (
    "INDEX.md",
    "includes/**",
    "snippets/**",
    "**/_*.md",
    "site/**",
    "node_modules/**",
)
# Folders never walked, whatever the configuration says (tool state, virtual environments).
_SKIP_DIRS = frozenset({".git", ".venv", ".venv-engine", "node_modules", "__pycache__", "site"})


@dataclass(frozen=True, slots=True)
class Section:
    """An index section: a folder (POSIX, relative to docs_dir; "." for the top level)."""

    path: str
    title: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class WikiConfig:
    root: Path
    docs_dir: str = "."  # POSIX, relative to root
    glossary: str = "GLOSSARY.md"  # POSIX, relative to root
    index_output: str = "INDEX.md"
    index_title: str = "Index"
    index_intro: str = ""
    sections: tuple[Section, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    statuses: tuple[str, ...] = DEFAULT_STATUSES
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


def load_config(root: Path) -> WikiConfig:
    """Read `wiki.yml` at `root` (optional) and fill in defaults from the tree's layout."""
    root = root.resolve()
    if not root.is_dir():
        raise ConfigError(f"{root}: not a directory")
    path = root / CONFIG_NAME
    data: dict[str, Any] = {}
    if path.is_file():
        data = _read_yaml(path)
    docs_dir = _docs_dir(root, data.get("docs_dir"), path)
    glossary = _glossary(root, docs_dir, data.get("glossary"))
    index = data.get("index") or {}
    if not isinstance(index, dict):
        raise ConfigError(f"{CONFIG_NAME}: 'index' must be a mapping")
    statuses = data.get("statuses", DEFAULT_STATUSES)
    if not isinstance(statuses, list | tuple) or not all(isinstance(s, str) for s in statuses):
        raise ConfigError(f"{CONFIG_NAME}: 'statuses' must be a list of strings")
    exclude = data.get("exclude", list(DEFAULT_EXCLUDE))
    if not isinstance(exclude, list | tuple) or not all(isinstance(s, str) for s in exclude):
        raise ConfigError(f"{CONFIG_NAME}: 'exclude' must be a list of glob patterns")
    output = str(index.get("output", "INDEX.md"))
    return WikiConfig(
        root=root,
        docs_dir=docs_dir,
        glossary=glossary,
        index_output=output,
        index_title=str(index.get("title", "Index")),
        index_intro=" ".join(str(index.get("intro", "")).split()),
        sections=_sections(index.get("sections", [])),
        exclude=(*tuple(exclude), output),
        statuses=tuple(statuses),
        source=CONFIG_NAME if path.is_file() else None,
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


_KNOWN = frozenset({"docs_dir", "glossary", "index", "statuses", "exclude"})


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid UTF-8 ({exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}:{mark.column + 1}" if mark else path.name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name}:1:1: must be a mapping of keys to values")
    return data


def _docs_dir(root: Path, value: Any, path: Path) -> str:
    if value is not None:
        if not isinstance(value, str) or not (root / value).is_dir():
            raise ConfigError(f"{path.name}: docs_dir {value!r} is not a folder under {root}")
        return Path(value).as_posix().strip("/") or "."
    for candidate in ("wiki", "docs"):
        if (root / candidate).is_dir():
            return candidate
    return "."


def _glossary(root: Path, docs_dir: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return Path(value).as_posix()
    candidate = f"{docs_dir}/glossary.md" if docs_dir != "." else "glossary.md"
    if (root / candidate).is_file():
        return candidate
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


@lru_cache(maxsize=64)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob where `**` spans folders and `*` stays within one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def is_excluded(config: WikiConfig, rel: str) -> bool:
    """True when `rel` (POSIX, relative to root) matches an exclude glob, tried against the
    path relative to the root and relative to docs_dir."""
    candidates = [rel]
    prefix = config.docs_dir + "/"
    if config.docs_dir != "." and rel.startswith(prefix):
        candidates.append(rel[len(prefix) :])
    return any(_glob_regex(p).match(c) for p in config.exclude for c in candidates)


def iter_pages(config: WikiConfig) -> list[Path]:
    """Every Markdown page of the wiki (sorted; excludes applied) plus the root README.md."""
    found: set[Path] = set()
    base = config.docs_path
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md"):
                path = Path(dirpath) / name
                if not is_excluded(config, path.relative_to(config.root).as_posix()):
                    found.add(path)
    readme = config.root / "README.md"
    if readme.is_file() and not is_excluded(config, "README.md"):
        found.add(readme)
    return sorted(found, key=lambda p: p.relative_to(config.root).as_posix())


def _read(args: tuple[Path, Path]) -> Page:
    return read_page(args[0], args[1])


# Below this many bytes a worker pool costs more than it saves.
_PARALLEL_BYTES = 2_000_000
CACHE_ENV = "WIKI_CACHE_DIR"  # a folder for the parse cache, or "off"


def _parse_all(config: WikiConfig, paths: list[Path]) -> list[Page]:
    jobs = [(p, config.root) for p in paths]
    workers = min(os.cpu_count() or 1, 8)
    if workers > 1 and len(jobs) > 50:
        total = sum(p.stat().st_size for p in paths)
        if total >= _PARALLEL_BYTES:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(_read, jobs, chunksize=max(1, len(jobs) // (workers * 8))))
    return [_read(job) for job in jobs]


@lru_cache(maxsize=1)
def _parser_version() -> str:
    """Changes whenever the parser or markdown-it-py changes, so cached pages are rebuilt."""
    import markdown_it

    source = Path(pages_module.__file__).read_bytes()
    return hashlib.sha256(source + markdown_it.__version__.encode()).hexdigest()[:16]


def _cache_file(config: WikiConfig) -> Path | None:
    setting = os.environ.get(CACHE_ENV, "")
    if setting == "off":
        return None
    if setting:
        base = Path(setting)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wikitools"
    key = hashlib.sha256(f"{config.root}\0{_parser_version()}".encode()).hexdigest()[:20]
    return base / f"pages-{key}.pickle"


def _load_cache(path: Path) -> dict[str, tuple[bytes, Page]]:
    try:
        with path.open("rb") as f:
            data = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_cache(path: Path, entries: dict[str, tuple[bytes, Page]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            pickle.dump(entries, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
    except OSError:
        pass  # a cache that cannot be written only costs time


def load_pages(config: WikiConfig, paths: Iterable[Path] | None = None) -> list[Page]:
    """Read and parse each page once, in path order. Parsed pages are cached by content hash
    (in $WIKI_CACHE_DIR, else ~/.cache/wikitools; WIKI_CACHE_DIR=off disables it), and
    misses are parsed in worker processes when there are many."""
    paths = list(iter_pages(config) if paths is None else paths)
    cache_file = _cache_file(config)
    if cache_file is None:
        return _parse_all(config, paths)
    cached = _load_cache(cache_file)
    rels = [p.relative_to(config.root).as_posix() for p in paths]
    digests = [hashlib.blake2b(p.read_bytes(), digest_size=16).digest() for p in paths]
    result: dict[str, Page] = {}
    missing: list[int] = []
    for i, (rel, digest) in enumerate(zip(rels, digests, strict=True)):
        hit = cached.get(rel)
        if hit is not None and hit[0] == digest:
            result[rel] = hit[1]
        else:
            missing.append(i)
    for i, page in zip(missing, _parse_all(config, [paths[i] for i in missing]), strict=True):
        result[rels[i]] = page
    if missing or len(cached) != len(rels):
        entries = {rel: (d, result[rel]) for rel, d in zip(rels, digests, strict=True)}
        _save_cache(cache_file, entries)
    return [result[rel] for rel in rels]
