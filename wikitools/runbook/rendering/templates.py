"""The one Jinja environment of the package: page regions (`*.md.j2`, Markdown, not escaped) and
charts (`*.svg.j2`, escaped), from `wikitools/templates/`."""

from __future__ import annotations

import functools

import jinja2


@functools.cache
def environment() -> jinja2.Environment:
    from wikitools.runbook.rendering.syntax import FILTERS

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("wikitools", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # SVG is markup: page text in it (titles, labels) is escaped. Markdown is not.
        autoescape=jinja2.select_autoescape(enabled_extensions=("svg.j2",),
                                            default_for_string=False, default=False),
    )
    env.filters.update(FILTERS)  # note, folded, boxed: in the dialect of the wiki written to
    return env

