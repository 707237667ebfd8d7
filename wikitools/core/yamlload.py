"""The one way YAML from pages and configuration is loaded: the safe loader (the C one when
built), with aliases bounded. Anchors and aliases share nodes, so a few lines (`a: &a [x, x]`,
`b: &b [*a, *a]`, …) stand for billions of values that every later walk would visit: a document
whose aliases expand past MAX_NODES is refused as a YAML error at the alias that crosses it."""

from __future__ import annotations

from typing import Any

import yaml

from wikitools.core.errors import InputError

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NODES = 100_000  # a compose file or front matter has hundreds


class AliasBomb(yaml.YAMLError, InputError):
    """A document whose aliases expand past MAX_NODES values (a YAML error like any other to
    the readers that locate those)."""

    def __init__(self, mark: Any) -> None:
        super().__init__(f"aliases expand past {MAX_NODES:,} values")
        self.problem = f"aliases expand past {MAX_NODES:,} values (an alias bomb?)"
        self.problem_mark = mark


def _check_expansion(root: yaml.Node) -> None:
    """Raise AliasBomb when the tree below `root`, with every alias expanded, holds more than
    MAX_NODES nodes. Shared nodes are sized once (memo by identity), without recursion."""
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = 1
            continue
        children: list[yaml.Node] = (
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
            else list(node.value))
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)
            continue
        total = 1 + sum(size.get(id(c), 0) for c in children)
        if total > MAX_NODES:
            raise AliasBomb(node.start_mark)
        size[id(node)] = total


def load_yaml(text: str, loader: type[yaml.SafeLoader] | None = None) -> Any:
    """The one document in `text` (None when empty), loaded safely; raises yaml.YAMLError for
    invalid YAML and AliasBomb for aliases that expand too far."""
    parser = (loader or LOADER)(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        if "*" in text:  # no alias, nothing shared: nothing to size
            _check_expansion(node)
        return parser.construct_document(node)
    finally:
        parser.dispose()
