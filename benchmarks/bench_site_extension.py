"""What the site extension (`wikitools.site.extension`: alerts, tooltips, chips, results from
the records) costs a build: the same site built with it and without it, the two builds taking
turns, the wall time of each printed side by side with their ratio. Goal: at most 1.2x.

With no TREE, this wiki (its pages, records and mkdocs.yml, copied). With a TREE that has no
mkdocs.yml (the community wiki: pages at the top, no site), a copy of it adopted first
(`wiki init`, `wiki runbook scan --write`, so it has results regions and a glossary) and built
from a `.mkdocs/mkdocs.yml` with this wiki's Markdown extensions. "Without" is the same
configuration with every feature of the extension turned off.

    python benchmarks/bench_site_extension.py [TREE] [--rounds N] [--builder mkdocs|zensical]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXTENSION = "wikitools.site.extension"
OWN = ("wiki", "runbooks", "overrides", "mkdocs.yml", "wiki.yml")


def _copy_own(dest: Path) -> Path:
    for name in OWN:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name)
        else:
            shutil.copy(source, dest / name)
    return dest / "mkdocs.yml"


def _extensions_block() -> str:
    """This wiki's `markdown_extensions:` section, as written."""
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    return text[text.index("markdown_extensions:"):]


def _adopt(tree: Path, dest: Path) -> Path:
    shutil.copytree(tree, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    if not (dest / ".git").exists():
        (dest / ".git").mkdir()  # `wiki init` adopts the top of a repository
    wiki = [str(BIN / "wiki")]
    if not (dest / "wiki.yml").exists():
        subprocess.run([*wiki, "init", "--root", str(dest)], check=True, capture_output=True)
    subprocess.run([*wiki, "runbook", "scan", "--write", "--root", str(dest)], check=False,
                   capture_output=True)
    config = dest / ".mkdocs" / "mkdocs.yml"
    config.parent.mkdir(exist_ok=True)
    config.write_text("site_name: Community wiki\ndocs_dir: ..\nsite_dir: ../../site-out\n"
                      "theme:\n  name: material\nplugins:\n  - wiki\n  - search\n"
                      + _extensions_block(), encoding="utf-8")
    return config


def _without(config: Path) -> Path:
    """The same configuration with every feature of the extension off (the `wiki` plugin,
    which keeps a page that is not UTF-8 from stopping the build, would add it if absent)."""
    text = config.read_text(encoding="utf-8")
    off = "".join(f"\n      {name}: false" for name in ("alerts", "glossary", "status", "results"))
    text = re.sub(rf"^([ \t]*- {re.escape(EXTENSION)})[^\n]*$", rf"\1:{off}", text,
                  flags=re.MULTILINE)
    out = config.with_name("without.yml")
    out.write_text(text, encoding="utf-8")
    return out


def _build(builder: str, config: Path, root: Path, site: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the build process)."""
    if builder == "mkdocs":
        command = [str(BIN / "mkdocs"), "build", "-q", "-f", str(config), "--site-dir", str(site)]
    else:
        command = [str(BIN / "zensical"), "build", "-f", str(config)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", type=Path, help="a docs tree (default: this wiki)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--builder", choices=("mkdocs", "zensical"), default="mkdocs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        config = _copy_own(root) if args.tree is None else _adopt(args.tree.resolve(), root)
        plain = _without(config)
        if args.builder == "zensical" and config.parent != root:
            raise SystemExit("zensical: only this wiki's own tree (its mkdocs.yml at the top)")
        site = Path(tmp) / "site"
        _build(args.builder, config, root, site)  # warm the file cache and bytecode once
        rows: list[dict[str, tuple[float, float]]] = []
        print("round   with: wall   cpu   without: wall   cpu   ratio: wall   cpu")
        for i in range(args.rounds):
            order = ((config, "with"), (plain, "without"))[:: 1 if i % 2 else -1]
            rows.append({name: _build(args.builder, c, root, site) for c, name in order})
            (ww, wc), (ow, oc) = rows[-1]["with"], rows[-1]["without"]
            print(f"{i + 1:5}   {ww:10.2f} {wc:5.2f}   {ow:13.2f} {oc:5.2f}   "
                  f"{ww / ow:11.2f}x {wc / oc:4.2f}x", flush=True)
    for k, what in ((0, "wall"), (1, "CPU")):
        ratio = statistics.median(r["with"][k] / r["without"][k] for r in rows)
        print(f"median {what}: with {statistics.median(r['with'][k] for r in rows):.2f} s, "
              f"without {statistics.median(r['without'][k] for r in rows):.2f} s; median "
              f"run-by-run ratio {ratio:.2f}x (goal at most 1.20x)")
    print(f"[{args.builder}, {args.tree or 'this wiki'}, {args.rounds} rounds; the CPU time of "
          "the build process is the steadier figure on a shared machine]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
