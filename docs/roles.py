"""A griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): the Sphinx roles of vtrain's docstrings as
cross-references of the site.

vtrain's docstrings name other objects the Sphinx way, ``:func:`build_job` ``, ``:class:`~vtrain.RunOptions` ``,
``:mod:`.diloco` `` (as `help()` and an editor show them). mkdocstrings' Sphinx docstring parser reads their
`:param x:` fields but leaves such inline roles as they are, so the reference pages showed `:func:` before
the name. This extension rewrites each role, when griffe loads a docstring and before anything renders it,
into the cross-reference mkdocs-autorefs resolves: a link to the object's entry where the site documents it,
its name in code where it does not. The docstrings themselves stay as they are.

This file is no page of the site (mkdocs.yml excludes it) and no part of the package.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: ``:func:`name` ``, ``:py:class:`~pkg.Name` ``, ``:meth:`title <Class.method>` ``.
ROLE = re.compile(r":(?:py:)?(?P<kind>func|meth|class|mod|attr|data|exc|obj|const|type):"
                  r"`(?P<text>[^`<]+?)(?:\s*<(?P<target>[^`>]+)>)?`")


def _module(obj: griffe.Object) -> griffe.Object:
    while not obj.is_module and obj.parent is not None:
        obj = obj.parent
    return obj


def _lookup(path: str, obj: griffe.Object) -> str:
    """`path` as the object griffe knows by it (an import followed to what it imports), else as it is."""
    try:
        found = obj.modules_collection[path]
        return str(found.final_target.path if found.is_alias else found.path)
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return path


def target(name: str, obj: griffe.Object) -> str:
    """The full dotted path a role's `name` stands for, read from where `obj`'s docstring stands."""
    name = name.removesuffix("()")
    if name.startswith("."):  # relative to the module, as Sphinx reads `.name`
        return _lookup(f"{_module(obj).path}{name}", obj)
    head, _, rest = name.partition(".")
    try:
        resolved = obj.resolve(head)
    except (griffe.NameResolutionError, KeyError):
        resolved = head
    return _lookup(f"{resolved}.{rest}" if rest else resolved, obj)


def rendered(docstring: str, obj: griffe.Object) -> str:
    """`docstring` with each Sphinx role as an optional autorefs cross-reference (a link where the site has
    the object, its name in code where it does not)."""

    def one(match: re.Match[str]) -> str:
        text, explicit = match["text"].strip(), match["target"]
        name = explicit.strip() if explicit else text.lstrip("~")
        title = text if explicit else (name.rsplit(".", 1)[-1] if text.startswith("~") else name.lstrip("."))
        return (f'<autoref identifier="{html.escape(target(name, obj))}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")

    return ROLE.sub(one, docstring)


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring's roles once griffe has the whole package (so names resolve across modules)."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None and ROLE.search(obj.docstring.value):
            obj.docstring.value = rendered(obj.docstring.value, obj)
