"""YAML with bounded work: a hostile or careless file is refused in well under a second with a short message.

`yaml.safe_load` alone expands a 1 KB alias bomb into 10^8 strings, recurses until RecursionError on deep
nesting, raises ValueError on a 4,301-digit integer, reads /dev/zero until memory runs out and keeps the last
of two equal keys. Here: the text is read up to `MAX_BYTES`; nesting deeper than `MAX_DEPTH`, a document that
would expand (aliases followed) to more than `MAX_NODES` values, a mapping of more than `MAX_KEYS` keys, an alias to a node that contains it, an integer
of more than `MAX_INT_DIGITS` digits and a key given twice in one mapping are `YamlLimit` errors, which the
loader turns into an InputError (exit 2) with the line and column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_BYTES = 16 * 1024 * 1024  # a 100,000-cable custom topology is about 6 MB
MAX_DEPTH = 64
MAX_NODES = 2_000_000  # scalars, lists and mappings of the document with every alias expanded
MAX_KEYS = 10_000  # in one mapping (a section of the schema has a few dozen fields)
MAX_INT_DIGITS = 40  # far beyond any count or size the schema accepts (it bounds each field itself)
MAX_SHOWN = 60  # characters of a value quoted in a message


class YamlLimit(Exception):
    def __init__(self, message: str, mark: Any = None):
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        super().__init__(f"{message}{where}")


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class _Bounds:
    """Constructor hooks: an expansion bound before constructing, duplicate keys refused and long integers refused
    before Python parses them. A mixin of BoundedLoader's loader (hence `super()` and `flatten_mapping` unknown to
    mypy here)."""

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()  # type: ignore[misc]
        if node is not None:
            total = _expanded_size(node)
            if total > MAX_NODES:
                raise YamlLimit(f"expands to more than {MAX_NODES:,} values with its aliases followed")
        return node

    def construct_mapping(self, node: Node, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            self.flatten_mapping(node)  # type: ignore[attr-defined]
            seen: dict[Any, Node] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node.value, str):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    first = seen[key].start_mark
                    raise YamlLimit(
                        f"key {shorten(key_node.value)!r} given twice (first at line {first.line + 1}: "
                        "YAML would silently keep only the last), again",
                        key_node.start_mark,
                    )
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]

    def construct_yaml_int(self, node: Node) -> int:
        digits = sum(c.isalnum() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise YamlLimit(f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS})", node.start_mark)
        return super().construct_yaml_int(node)  # type: ignore[misc]


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 20x faster on a large file


class BoundedLoader(_Bounds, _Base):  # type: ignore[misc, valid-type]
    pass


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
BoundedLoader.add_constructor("tag:yaml.org,2002:map", BoundedLoader.construct_yaml_map)


def _expanded_size(root: Node) -> int:
    """Values of the document with aliases expanded, counted over the node graph (linear in its size, not in the
    expansion); a node reachable from itself is an error (its expansion is infinite)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            if isinstance(node, SequenceNode):
                kids = node.value
            else:
                kids = [n for pair in node.value for n in pair]
            size[key] = min(1 + sum(size[id(k)] for k in kids), MAX_NODES + 1)
            continue
        if key in size:
            continue
        if not isinstance(node, (SequenceNode, MappingNode)):
            size[key] = 1
            continue
        if key in on_path:
            raise YamlLimit("an alias refers to a node that contains it (an infinite value)", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        kids = node.value if isinstance(node, SequenceNode) else [n for pair in node.value for n in pair]
        for kid in kids:
            kid_key = id(kid)
            if kid_key in on_path:
                raise YamlLimit("an alias refers to a node that contains it (an infinite value)", kid.start_mark)
            if kid_key not in size:
                stack.append((kid, False))
    return size[id(root)]


def _check_depth(text: str) -> None:
    """Nesting and mapping sizes, on parser events (libyaml's parser keeps its own stack: no recursion)."""
    stack: list[list[int]] = []  # per open collection: [is a mapping, child nodes so far]
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            stack.pop()
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        if stack:
            parent = stack[-1]
            parent[1] += 1
            if parent[0] and parent[1] > 2 * MAX_KEYS:
                raise YamlLimit(f"a mapping of more than {MAX_KEYS:,} keys", event.start_mark)
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([isinstance(event, yaml.MappingStartEvent), 0])
            if len(stack) > MAX_DEPTH:
                raise YamlLimit(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)


def load_bounded(text: str) -> Any:
    """Parse one YAML document within the bounds above (YamlLimit or yaml.YAMLError otherwise)."""
    if len(text) > MAX_BYTES:
        raise YamlLimit(f"{len(text):,} characters: a scenario file is at most {MAX_BYTES // (1024 * 1024)} MiB")
    _check_depth(text)  # on parser events (no recursion), before a composer recurses into the nesting
    loader = BoundedLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlLimit(f"nested too deeply (at most {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def read_text_bounded(path: Path, limit: int = MAX_BYTES) -> str:
    """At most `limit` bytes of a file (so /dev/zero or a multi-GB file is refused at once), as UTF-8."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise YamlLimit(f"larger than {limit // (1024 * 1024)} MiB: not a scenario file")
    return data.decode("utf-8")
