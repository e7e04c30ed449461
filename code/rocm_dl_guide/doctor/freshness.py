"""Is the compatibility data still current? Checks its sources on the web.

Two questions, answered by :func:`check_sources` (the command line's
``check-sources``; it needs the network and is not part of ``make test``):

1. **Do the cited pages still say what the data took from them?** Every
   source in ``compatibility.json`` is fetched (redirects followed; a GitHub
   ``blob`` URL is read in its raw form) and stripped to text, and each of the
   source's ``checks`` strings must still appear in it (whitespace is
   collapsed on both sides, case matters). A source that answers 404/410
   has gone; one that answers 301/308 to a different URL has moved. A source
   without ``checks`` is noted, not failed.
2. **Is there something newer than the data knows?** ``known_latest`` in the
   data names the newest ROCm release, PyTorch ROCm wheel indexes and
   container tags it knows. Newer ones are looked up on AMD's release notes
   and release history pages, Docker Hub's tag list and PyTorch's wheel
   listing (:data:`DISCOVERY_URLS`).

"Newer" (:func:`is_newer`) is judged per release line: a version whose
major.minor line the data knows is new when it is above everything known in
that line (ROCm 7.2.5 when the data knows 7.2.4); any other version is new
when it is above everything known at all (ROCm 10.1.0 when the data knows
10.0.x). An ``x`` in a known version stands for the whole line.

Every URL can be redirected for tests or mirrors: ``rewrite`` maps URL
prefixes to replacements, by default read from the environment variable
:data:`ENV_VAR` as a JSON object, e.g.
``{"https://rocm.docs.amd.com": "http://127.0.0.1:8000/rocm-docs"}``.

Plain functions only: they return a :class:`Report` or raise
:class:`NetworkUnavailable` (nothing could be fetched at all) or
``ValueError`` (a malformed ``ENV_VAR``); the command line formats them.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser

from rocm_dl_guide import __version__

from . import compat_data

ENV_VAR = "ROCM_DL_GUIDE_SOURCES_BASE"
DEFAULT_TIMEOUT = 20.0
MAX_BYTES = 32 * 1024 * 1024
MAX_TAG_PAGES = 5
USER_AGENT = f"rocm-dl-guide-check-sources/{__version__} (+https://github.com/)"

# Where newer releases, tags and wheel indexes are looked up. The ROCm pages
# are the ones AMD's documentation links as "Release notes" and "Version
# List"; the Docker Hub URL is its public v2 tag-list API (JSON with
# ``results[].name`` and a ``next`` page URL); PyTorch's per-package listing
# links every torch wheel under its index directory (/whl/rocm7.1/torch-...).
DISCOVERY_URLS: dict[str, str] = {
    "release_notes": "https://rocm.docs.amd.com/en/latest/about/release-notes.html",
    "release_history": "https://rocm.docs.amd.com/en/latest/release/versions.html",
    "container_tags": "https://hub.docker.com/v2/repositories/{repo}/tags"
    "?page_size=100&ordering=last_updated",
    "wheel_index": "https://download.pytorch.org/whl/torch/",
}

WILDCARD = 10**6  # an "x" in a known version: the whole line is known
_VERSION_RE = re.compile(r"\d+(?:\.(?:\d+|x))*")
_RELEASE_TITLE_RE = re.compile(
    r"\bROCm(?:\s+Core\s+SDK)?\s+(\d+\.\d+(?:\.\d+)?)\s+release\s+notes", re.IGNORECASE
)
_DOCS_LINK_RE = re.compile(r"/en/(?:docs-)?(\d+\.\d+(?:\.\d+)?)/")
_INDEX_DIR_RE = re.compile(r"(?:^|/)(rocm\d+(?:\.\d+)+)/")
_LOCAL_LABEL_RE = re.compile(r"\+rocm(\d+\.\d+)")
_TAG_RE = re.compile(r"^rocm(\d+(?:\.\d+)*)_.+_pytorch_release_(\d+(?:\.\d+)*)$")


class NetworkUnavailable(RuntimeError):
    """Nothing could be fetched: no network, or every host refused."""


@dataclass(frozen=True)
class Finding:
    """One thing the check found about one source or discovery page."""

    kind: str  # missing, moved, gone, error, unreachable, new-release, new-tag, new-index, note
    key: str  # source key, or rocm-releases / the container repository / pytorch-wheels
    url: str
    detail: str

    @property
    def stale(self) -> bool:
        return self.kind != "note"


@dataclass
class Report:
    """What :func:`check_sources` found."""

    sources: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def stale(self) -> list[Finding]:
        return [f for f in self.findings if f.stale]

    @property
    def notes(self) -> list[Finding]:
        return [f for f in self.findings if not f.stale]

    @property
    def current(self) -> bool:
        return not self.stale


# --------------------------------------------------------------------------- text


class _TextAndLinks(HTMLParser):
    """Collects an HTML page's visible text and its link targets."""

    _SKIP = frozenset({"script", "style", "noscript", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.links: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._skipping += 1
        for name, value in attrs:
            if name == "href" and value:
                self.links.append(value)
        if tag in {"br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4"}:
            self.parts.append(" ")

    def handle_endtag(self, tag):
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in {"p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4"}:
            self.parts.append(" ")

    def handle_data(self, data):
        if not self._skipping:
            self.parts.append(data)


def collapse(text: str) -> str:
    """``text`` with every run of whitespace (non-breaking spaces too) as one space."""
    return " ".join(text.split())


def looks_like_html(body: str, content_type: str = "") -> bool:
    if "html" in content_type.lower():
        return True
    head = body.lstrip()[:1000].lower()
    return head.startswith(("<!doctype html", "<html")) or "<body" in head


def page_text(body: str, content_type: str = "") -> tuple[str, list[str]]:
    """(visible text with collapsed whitespace, link targets) of a page.

    HTML is stripped of its tags, scripts and styles; anything else (a raw
    reStructuredText or CSV file) is used as it is.
    """
    if not looks_like_html(body, content_type):
        return collapse(body), []
    parser = _TextAndLinks()
    parser.feed(body)
    parser.close()
    return collapse("".join(parser.parts)), parser.links


def missing_checks(text: str, checks: list[str]) -> list[str]:
    """The ``checks`` strings that do not appear in ``text`` (whitespace collapsed)."""
    haystack = collapse(text)
    return [c for c in checks if collapse(str(c)) not in haystack]


# --------------------------------------------------------------------------- URLs


def rewrites_from_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The URL prefix map in :data:`ENV_VAR` (``{}`` when unset); ``ValueError`` if malformed."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not raw:
        return {}
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${ENV_VAR} is not valid JSON: {exc}") from None
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise ValueError(f'${ENV_VAR} must be a JSON object of strings, {{"https://...": "..."}}')
    return mapping


def raw_github_url(url: str) -> str:
    """A github.com ``blob`` URL as its raw.githubusercontent.com form; other URLs unchanged."""
    parts = urllib.parse.urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if parts.netloc.lower() not in {"github.com", "www.github.com"} or len(segments) < 5:
        return url
    if segments[2] != "blob":
        return url
    owner, repo, _, ref, *path = segments
    return f"https://raw.githubusercontent.com/{owner}/{repo}/{ref}/{'/'.join(path)}"


def rewrite_url(url: str, rewrite: dict[str, str]) -> str:
    """``url`` with its longest matching prefix in ``rewrite`` replaced."""
    for prefix in sorted(rewrite, key=len, reverse=True):
        if url.startswith(prefix):
            return rewrite[prefix] + url[len(prefix) :]
    return url


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


# --------------------------------------------------------------------------- fetching


@dataclass
class Page:
    """A fetched page: ``status`` 200 with a body, or an HTTP error status."""

    url: str  # the URL asked for (after rewriting)
    status: int
    body: str = ""
    content_type: str = ""
    moved_to: str | None = None  # target of a permanent (301/308) redirect elsewhere


class _RecordingRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self) -> None:
        self.hops: list[tuple[int, str, str]] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.hops.append((code, req.full_url, newurl))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Fetcher:
    """Fetches URLs (rewritten by ``rewrite``) once each and counts network failures.

    Raises :class:`NetworkUnavailable` as soon as two fetches in a row have
    failed at the network level before any succeeded, so that an offline run
    ends quickly with one message.
    """

    def __init__(self, rewrite: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.rewrite = dict(rewrite or {})
        self.timeout = timeout
        self.succeeded = 0
        self.network_errors: list[str] = []
        self._cache: dict[str, Page | OSError] = {}

    def get(self, url: str) -> Page:
        """The page at ``url``; an ``OSError`` when the host cannot be reached."""
        target = rewrite_url(url, self.rewrite)
        if target not in self._cache:
            self._cache[target] = self._fetch(target)
        result = self._cache[target]
        if isinstance(result, OSError):
            raise result
        return result

    def _fetch(self, target: str) -> Page | OSError:
        redirects = _RecordingRedirects()
        opener = urllib.request.build_opener(redirects)
        request = urllib.request.Request(target, headers={"User-Agent": USER_AGENT})
        try:
            with opener.open(request, timeout=self.timeout) as response:
                raw = response.read(MAX_BYTES)
                charset = response.headers.get_content_charset() or "utf-8"
                page = Page(target, response.status, raw.decode(charset, errors="replace"))
                page.content_type = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            page = Page(target, exc.code)
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            self.network_errors.append(f"{target}: {reason}")
            if not self.succeeded and len(self.network_errors) >= 2:
                raise NetworkUnavailable(self.unavailable_message()) from None
            return OSError(f"cannot reach {target}: {reason}")
        self.succeeded += 1
        for code, old, new in redirects.hops:
            if code in (301, 308) and not _same_url(old, new):
                page.moved_to = new
        return page

    def unavailable_message(self) -> str:
        first = self.network_errors[0] if self.network_errors else "no answer"
        return f"cannot reach the network ({first}); nothing was checked"


# --------------------------------------------------------------------------- versions


def version_key(text: str, width: int = 3) -> tuple[int, ...] | None:
    """``"7.2.4"`` -> ``(7, 2, 4)``; ``"10.0.x"`` -> ``(10, 0, WILDCARD)``; missing parts 0."""
    match = _VERSION_RE.search(str(text))
    if not match:
        return None
    parts = [WILDCARD if p == "x" else int(p) for p in match.group(0).split(".")]
    if len(parts) < width and parts[-1] == WILDCARD:
        parts += [WILDCARD] * (width - len(parts))
    return tuple((parts + [0] * width)[:width])


def is_newer(candidate: tuple, known: list[tuple]) -> bool:
    """Whether ``candidate`` is newer than the data knows (see the module docstring).

    Items are tuples whose first two numbers name the release line
    (major.minor of ROCm); nothing known means nothing can be judged newer.
    """
    if not known or candidate in known:
        return False
    line = [k for k in known if k[:2] == candidate[:2]]
    return candidate > max(line or known)


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def known_rocm(data: dict) -> list[tuple[int, ...]]:
    """ROCm versions the data knows: its releases and ``known_latest.rocm``."""
    names = [r.get("rocm") for r in data.get("releases", []) if isinstance(r, dict)]
    names += _as_list((data.get("known_latest") or {}).get("rocm"))
    return sorted({k for n in names if n and (k := version_key(n))})


def release_versions(text: str, links: list[str]) -> set[str]:
    """ROCm release versions named on a release notes or release history page.

    Release notes titles ("ROCm 7.2.4 release notes", "ROCm Core SDK 10.0.0
    release notes") and links to a release's documentation (``/en/docs-7.2.4/``,
    ``/en/10.0.0/``); preview builds (``/en/7.13.0-preview/``) are not releases.
    """
    found = set(_RELEASE_TITLE_RE.findall(text))
    for link in links:
        found.update(_DOCS_LINK_RE.findall(link))
    return found


def wheel_indexes(text: str, links: list[str]) -> set[str]:
    """ROCm wheel index names (``rocm7.1``) in a PyTorch wheel listing; nightlies skipped."""
    found: set[str] = set()
    for link in links + text.split():
        link = urllib.parse.unquote(link)
        if "nightly" in link:
            continue
        found.update(_INDEX_DIR_RE.findall(link))
        found.update(f"rocm{v}" for v in _LOCAL_LABEL_RE.findall(link))
    return found


def tag_key(tag: str) -> tuple[int, ...] | None:
    """``rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.9.1`` -> ``(7, 2, 4, 2, 9, 1)``."""
    match = _TAG_RE.match(tag)
    if not match:
        return None
    rocm, torch = version_key(match.group(1)), version_key(match.group(2))
    return rocm + torch if rocm and torch else None


# --------------------------------------------------------------------------- the checks


def check_source(fetcher: Fetcher, key: str, source: dict) -> list[Finding]:
    """Findings for one source: gone, moved, facts missing, or no checks recorded."""
    url = str(source.get("url") or "")
    if not url:
        return [Finding("error", key, "", "the source has no url")]
    try:
        page = fetcher.get(raw_github_url(url))
    except OSError as exc:
        return [Finding("unreachable", key, url, str(exc))]
    if page.status in (404, 410):
        return [Finding("gone", key, url, f"HTTP {page.status}: the page is gone")]
    if page.status >= 400:
        return [Finding("error", key, url, f"HTTP {page.status}")]
    findings = []
    if page.moved_to:
        findings.append(Finding("moved", key, url, f"permanently redirected to {page.moved_to}"))
    checks = source.get("checks")
    if not checks:
        findings.append(Finding("note", key, url, "no checks recorded"))
        return findings
    text, _ = page_text(page.body, page.content_type)
    for fact in missing_checks(text, _as_list(checks)):
        findings.append(Finding("missing", key, url, f"no longer contains {fact!r}"))
    return findings


def _discovery_page(fetcher: Fetcher, key: str, url: str) -> tuple[Page | None, list[Finding]]:
    try:
        page = fetcher.get(url)
    except OSError as exc:
        return None, [Finding("unreachable", key, url, str(exc))]
    if page.status >= 400:
        return None, [Finding("error", key, url, f"HTTP {page.status}")]
    return page, []


def find_new_releases(fetcher: Fetcher, data: dict, urls: dict[str, str]) -> list[Finding]:
    """ROCm releases on the release notes and history pages that the data does not know."""
    known = known_rocm(data)
    latest = ", ".join(_as_list((data.get("known_latest") or {}).get("rocm"))) or "nothing"
    findings: list[Finding] = []
    seen: dict[str, str] = {}  # version -> the first page that names it
    for name in ("release_notes", "release_history"):
        page, problems = _discovery_page(fetcher, "rocm-releases", urls[name])
        findings += problems
        if page is not None:
            text, links = page_text(page.body, page.content_type)
            for version in release_versions(text, links):
                seen.setdefault(version, urls[name])
    for version in sorted(seen, key=version_key):
        if is_newer(version_key(version), known):
            detail = f"ROCm {version} is released; the data knows up to {latest}"
            findings.append(Finding("new-release", "rocm-releases", seen[version], detail))
    return findings


def _tag_names(fetcher: Fetcher, key: str, url: str) -> tuple[list[str], list[Finding]]:
    names: list[str] = []
    next_url: str | None = url
    for _ in range(MAX_TAG_PAGES):
        if not next_url:
            break
        page, problems = _discovery_page(fetcher, key, next_url)
        if page is None:
            return names, problems
        try:
            payload = json.loads(page.body)
            names += [str(r["name"]) for r in payload.get("results", []) if "name" in r]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return names, [Finding("error", key, next_url, f"not a Docker Hub tag list: {exc}")]
        nxt = payload.get("next")
        next_url = urllib.parse.urljoin(page.url, nxt) if nxt else None
        if next_url:  # Docker Hub's next links are absolute: map them back for rewriting
            next_url = _unrewrite(next_url, fetcher.rewrite)
    return names, []


def _unrewrite(url: str, rewrite: dict[str, str]) -> str:
    for prefix, replacement in rewrite.items():
        if url.startswith(replacement):
            return prefix + url[len(replacement) :]
    return url


def find_new_container_tags(fetcher: Fetcher, data: dict, urls: dict[str, str]) -> list[Finding]:
    """Container tags newer than ``known_latest.container_tags`` lists, per repository."""
    findings: list[Finding] = []
    tags = (data.get("known_latest") or {}).get("container_tags") or {}
    for repo, known_tags in sorted(tags.items()):
        known = [k for t in _as_list(known_tags) if (k := tag_key(t))]
        url = urls["container_tags"].format(repo=repo)
        names, problems = _tag_names(fetcher, repo, url)
        findings += problems
        newest = max(_as_list(known_tags), key=lambda t: tag_key(t) or (), default="nothing")
        for name in sorted(set(names)):
            key = tag_key(name)
            if key and name not in _as_list(known_tags) and is_newer(key, known):
                findings.append(
                    Finding("new-tag", repo, url, f"{repo}:{name} (the data knows up to {newest})")
                )
    return findings


def find_new_wheel_indexes(fetcher: Fetcher, data: dict, urls: dict[str, str]) -> list[Finding]:
    """PyTorch ROCm wheel indexes newer than ``known_latest.pytorch_rocm_indexes``."""
    known_names = _as_list((data.get("known_latest") or {}).get("pytorch_rocm_indexes"))
    known = [k for n in known_names if (k := version_key(n))]
    if not known:
        return []
    page, findings = _discovery_page(fetcher, "pytorch-wheels", urls["wheel_index"])
    if page is None:
        return findings
    text, links = page_text(page.body, page.content_type)
    for name in sorted(wheel_indexes(text, links), key=version_key):
        if name not in known_names and is_newer(version_key(name), known):
            detail = f"wheel index {name} exists (the data knows {', '.join(known_names)})"
            findings.append(Finding("new-index", "pytorch-wheels", urls["wheel_index"], detail))
    return findings


def check_sources(
    data: dict | None = None,
    *,
    rewrite: dict[str, str] | None = None,
    urls: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    discover: bool = True,
) -> Report:
    """Check every source of ``data`` (default: the package's data) and look for newer releases.

    ``rewrite`` defaults to :func:`rewrites_from_env`; ``urls`` overrides
    entries of :data:`DISCOVERY_URLS`. Raises :class:`NetworkUnavailable`
    when not a single page could be fetched.
    """
    data = compat_data.data() if data is None else data
    fetcher = Fetcher(rewrites_from_env() if rewrite is None else rewrite, timeout)
    where = {**DISCOVERY_URLS, **(urls or {})}
    sources = data.get("sources") or {}
    report = Report(sources=len(sources))
    for key in sorted(sources):
        report.findings += check_source(fetcher, key, sources[key] or {})
    if discover and data.get("known_latest"):
        report.findings += find_new_releases(fetcher, data, where)
        report.findings += find_new_container_tags(fetcher, data, where)
        report.findings += find_new_wheel_indexes(fetcher, data, where)
    elif discover:
        report.findings.append(
            Finding("note", "known_latest", "", "no known_latest recorded: nothing to compare")
        )
    if not fetcher.succeeded and fetcher.network_errors:
        raise NetworkUnavailable(fetcher.unavailable_message())
    return report
