"""The timeline page as a tree, parsed by the standard library's HTML parser (or read back from a browser's
``--dump-dom``), so tests can check what is drawn by its ``data-`` attributes."""

from __future__ import annotations

import html.parser
from typing import ClassVar

#: Every element the page may contain; anything else means markup leaked from the input.
ALLOWED = {"html", "head", "meta", "title", "style", "body", "svg", "g", "rect", "text", "tspan", "line", "path"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None):
        self.tag, self.attrs, self.parent, self.text = tag, attrs, parent, ""
        self.children: list[Node] = []


class Page(html.parser.HTMLParser):
    VOID: ClassVar[set[str]] = {"meta"}  # in SVG, rect, line and path have children (their <title>) unless self-closed

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.stack = [self.root]
        self.nodes: list[Node] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.stack[-1])
        self.stack[-1].children.append(node)
        self.nodes.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.stack[-1])
        self.stack[-1].children.append(node)
        self.nodes.append(node)

    def handle_endtag(self, tag):
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data):
        self.stack[-1].text += data

    def kind(self, kind: str) -> list[Node]:
        return [node for node in self.nodes if node.attrs.get("data-kind") == kind]


def tooltip(node: Node) -> str:
    """The text of ``node``'s ``<title>`` child (its tooltip)."""
    return next(child.text for child in node.children if child.tag == "title")
