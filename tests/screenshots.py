"""Build the site, serve it on 127.0.0.1 and screenshot key pages with headless Chromium.

Not a test: a tool for looking at the site as a reader would. Each page is captured at
desktop (1366x900) and phone (390x844) width, in the light and the dark palette (the palette
follows the browser's colour-scheme preference until a reader uses the toggle).

    .venv/bin/python tests/screenshots.py                 # key pages -> .artifacts/screenshots/
    .venv/bin/python tests/screenshots.py --tall          # also capture 3000 px tall pages
    .venv/bin/python tests/screenshots.py --page models/gpt-oss/
    .venv/bin/python tests/screenshots.py --draft         # preview while links are still broken

Needs Chromium (Debian: `apt-get install -y chromium`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from harness import free_port, wait_until

ROOT = Path(__file__).resolve().parent.parent
VIEWPORTS = {"desktop": (1366, 900), "phone": (390, 844)}
SCHEMES = {
    "light": ["--blink-settings=preferredColorScheme=1"],
    "dark": ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"],
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--virtual-time-budget=4000",
]


def find_chromium(explicit: str | None) -> str:
    for name in [explicit, "chromium", "chromium-browser", "google-chrome"]:
        if name and shutil.which(name):
            return str(shutil.which(name))
    sys.exit("error: Chromium not found (Debian: apt-get install -y chromium)")


def build_site(root: Path, site_dir: Path, *, strict: bool = True) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    mode = "--strict" if strict else "--no-strict"
    cmd = [str(mkdocs), "build", mode, "--site-dir", str(site_dir)]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"error: mkdocs build --strict failed (exit {proc.returncode})")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def wait_for(url: str, seconds: float = 10.0) -> None:
    if not wait_until(lambda: _answers(url), seconds):
        raise TimeoutError(f"{url} did not answer within {seconds:g} s")


def key_pages(docs: Path) -> list[str]:
    """Home, onboarding, glossary, section pages, one hub and every page with a runbook."""
    wanted: list[Path] = []
    for rel in ["index.md", "onboarding.md", "glossary.md", "contributing.md"]:
        if (docs / rel).is_file():
            wanted.append(docs / rel)
    wanted += sorted(p for p in docs.glob("*/index.md"))
    hubs = sorted(docs.glob("models/*/index.md"))
    wanted += hubs[:1]
    runbook_pages = sorted(
        p for p in docs.rglob("*.md") if ".runbook-server" in p.read_text(encoding="utf-8")
    )
    wanted += runbook_pages[:3]
    urls: list[str] = []
    for path in wanted:
        rel = path.relative_to(docs).as_posix()
        url = re.sub(r"(^|/)index\.md$", r"\1", rel)
        url = re.sub(r"\.md$", "/", url)
        if url not in urls:
            urls.append(url)
    return urls


def slug(url: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", url.lower()).strip("-") or "home"


def shoot(chromium: str, url: str, out: Path, size: tuple[int, int], extra: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="wiki-chromium-") as profile:
        cmd = [
            chromium,
            *CHROMIUM_FLAGS,
            *extra,
            f"--user-data-dir={profile}",
            f"--window-size={size[0]},{size[1]}",
            f"--screenshot={out}",
            url,
        ]
        subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    if not out.is_file():
        sys.exit(f"error: no screenshot written for {url}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="project root (mkdocs.yml)")
    parser.add_argument("--out", type=Path, default=ROOT / ".artifacts" / "screenshots")
    parser.add_argument("--page", action="append", help="page URL path, e.g. models/ (repeat)")
    parser.add_argument("--tall", action="store_true", help="also capture 3000 px tall pages")
    parser.add_argument("--chromium", help="Chromium executable")
    parser.add_argument(
        "--draft", action="store_true", help="build with --no-strict (pages still being written)"
    )
    args = parser.parse_args(argv)

    chromium = find_chromium(args.chromium)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wiki-site-") as tmp:
        site = Path(tmp) / "site"
        build_site(args.root, site, strict=not args.draft)
        pages = args.page or key_pages(args.root / "wiki")
        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(site),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}/"
            wait_for(base)
            for page in pages:
                for vname, size in VIEWPORTS.items():
                    for scheme, flags in SCHEMES.items():
                        sizes = [("", size)]
                        if args.tall:
                            sizes.append(("-tall", (size[0], 3000)))
                        for suffix, wsize in sizes:
                            out = args.out / f"{slug(page)}--{vname}-{scheme}{suffix}.png"
                            shoot(chromium, base + page, out, wsize, flags)
                            print(out)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
