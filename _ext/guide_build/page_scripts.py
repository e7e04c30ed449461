"""Page scripts: each script once per page.

sphinx-thebe's inline configuration (the launch buttons' live code) is
registered twice under Jupyter Book 1.0; this drops the second copy.
"""

from __future__ import annotations


def _on_page_context(app, pagename, templatename, context, doctree) -> None:
    """Drop scripts added twice: sphinx-thebe's inline configuration is registered
    twice under Jupyter Book 1.0, which redeclares ``const THEBE_JS_URL`` and
    raises a SyntaxError in every page's console. Runs first: the event stops at
    the first handler that returns a template name."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, str]] = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        filename = getattr(script, "filename", script) or ""  # None and "" alike
        key = (str(filename), str(attributes.get("body", "")))
        if key in seen:
            continue
        seen.add(key)
        unique.append(script)
    # In place: the list is the builder's own, and the handlers after this one
    # add to it (sphinx.ext.mathjax adds MathJax to the pages with math). A new
    # list here dropped their scripts: no page loaded MathJax (issue 44).
    scripts[:] = unique


def setup(app) -> None:
    app.connect("html-page-context", _on_page_context, priority=100)
