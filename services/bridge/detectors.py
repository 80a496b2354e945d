"""What the sanitizer looks for, in the order it looks.

The secret rules are Yelp's ``detect-secrets`` plugins (imported on first use): provider keys and
tokens (AWS, Azure storage, GitHub, GitLab, Slack, Stripe, OpenAI, SendGrid, Twilio, npm, PyPI,
Discord, Telegram, Mailchimp, Square, Artifactory, IBM Cloud, SoftLayer, Cloudant), JWTs, private
key headers, credentials in URLs (``BasicAuthDetector``), secrets in assignments
(``KeywordDetector``, with its quoted *and* config-file forms), public IPv4 addresses, and its
Shannon-entropy measure for long random strings.  Around them, a few rules detect-secrets has no
plugin for: newer key formats (``sk-proj-``, ``sk-ant-``, ``AIza``, ``hf_``, ``github_pat_``),
bearer tokens, the whole private-key block (the plugin matches its header line), e-mail addresses,
``user@host``, private and IPv6 addresses, home and absolute paths, host and project names listed
in the configuration.

Each detector takes the text (with what earlier detectors found masked out, same length) and
yields ``(start, end)`` spans to redact.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the model is pydantic: a search's redaction (no config) need not import it
    from services.workspace.bridge_config import BridgeConfig

Span = tuple[int, int]
Detector = Callable[[str], Iterator[Span]]

MASK = "\x00"
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=~.]")


# -- detect-secrets plugins -----------------------------------------------------------------------
@functools.cache
def _plugins() -> dict[str, Any]:
    """One instance of every plugin the sanitizer uses (detect-secrets is imported here only)."""
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.cloudant import CloudantDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString
    from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.keyword import KeywordDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.softlayer import SoftlayerDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    keys = [
        AWSKeyDetector(),
        AzureStorageKeyDetector(),
        GitHubTokenDetector(),
        GitLabTokenDetector(),
        SlackDetector(),
        StripeDetector(),
        OpenAIDetector(),
        SendGridDetector(),
        TwilioKeyDetector(),
        NpmDetector(),
        PypiTokenDetector(),
        DiscordBotTokenDetector(),
        TelegramBotTokenDetector(),
        MailchimpDetector(),
        SquareOAuthDetector(),
        ArtifactoryDetector(),
        IbmCloudIamDetector(),
        SoftlayerDetector(),
        CloudantDetector(),
    ]
    return {
        "keys": keys,
        "jwt": JwtTokenDetector(),
        "private_key": PrivateKeyDetector(),
        "basic_auth": BasicAuthDetector(),
        "keyword": KeywordDetector(),
        "ip_public": IPPublicDetector(),
        "base64": Base64HighEntropyString(),
        "hex": HexHighEntropyString(),
    }


def _keyword_maps() -> list[dict[Any, int]]:
    from detect_secrets.plugins import keyword

    return [keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, keyword.CONFIG_DENYLIST_REGEX_TO_GROUP]


# -- helpers --------------------------------------------------------------------------------------
def _occurrences(text: str, value: str) -> Iterator[Span]:
    if not value:
        return
    start = text.find(value)
    while start >= 0:
        yield start, start + len(value)
        start = text.find(value, start + len(value))


def _widen(text: str, span: Span) -> Span:
    """Grow a secret's span to the whole token it sits in (a JWT's signature, a key's tail)."""
    start, end = span
    while start > 0 and _TOKEN_CHARS.match(text[start - 1]) and text[start - 1] not in "./~":
        start -= 1
    while end < len(text) and _TOKEN_CHARS.match(text[end]):
        end += 1
    while end > start and text[end - 1] == ".":
        end -= 1
    return start, end


def _values(plugin: Any, text: str) -> Iterator[Span]:
    for value in set(plugin.analyze_string(text)):
        value = str(value).strip().strip("\"'=:")
        if len(value) >= 6:
            for span in _occurrences(text, value):
                yield _widen(text, span)


def _regex(pattern: str, flags: int = 0, group: int = 0) -> Detector:
    compiled = re.compile(pattern, flags)

    def detect(text: str) -> Iterator[Span]:
        for match in compiled.finditer(text):
            if match.group(group):
                yield match.span(group)

    return detect


# -- secrets ---------------------------------------------------------------------------------------
_END_BLOCK = re.compile(r"-----END [A-Z0-9 ]*(?:PRIVATE KEY|KEY BLOCK)[A-Z ]*-----|Private-MAC:\s*\S+")


def private_key_blocks(text: str) -> Iterator[Span]:
    """The whole block (header to END line, or to the end of the text when it has none)."""
    for regex in _plugins()["private_key"].denylist:
        for match in regex.finditer(text):
            start = match.start()
            dashes = text.rfind("-----", 0, start)
            if dashes >= 0 and dashes == start - 5:
                start = dashes
            end_match = _END_BLOCK.search(text, match.end())
            yield start, end_match.end() if end_match else len(text)


def jwts(text: str) -> Iterator[Span]:
    yield from _values(_plugins()["jwt"], text)


_EXTRA_KEYS = re.compile(
    r"(?<![\w-])(?:"
    r"sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-|ant-)?[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|github_pat_[A-Za-z0-9_]{22,}"  # GitHub fine-grained
    r"|(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{30,}"  # GitHub, any length
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"  # Stripe, test keys too
    r"|npm_[A-Za-z0-9]{30,}"  # npm
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|AKIA[0-9A-Z]{16}"
    r")(?![\w-])"
)


def provider_keys(text: str) -> Iterator[Span]:
    for plugin in _plugins()["keys"]:
        yield from _values(plugin, text)
    for match in _EXTRA_KEYS.finditer(text):
        yield match.span()


def url_credentials(text: str) -> Iterator[Span]:
    """``user:password`` of ``scheme://user:password@host`` (the password found by BasicAuthDetector)."""
    for regex in _plugins()["basic_auth"].denylist:
        for match in regex.finditer(text):
            yield match.start() + 3, match.end() - 1


_TRAILING = ".,;:!?)]}>`"


_TYPE_WORDS = frozenset(
    "str string int integer bool boolean float bytes none null nil true false secretstr optional required "
    "any object dict list text varchar char field value".split()
)


def _not_a_value(value: str) -> bool:
    """detect-secrets' own false-positive heuristics (``${VAR}``, ``<secret>``, ``$VAR``) and type
    names (``password: str``)."""
    from detect_secrets.filters.heuristic import is_prefixed_with_dollar_sign, is_templated_secret

    return (
        is_templated_secret(value) or is_prefixed_with_dollar_sign(value) or value.lower().strip("()[]") in _TYPE_WORDS
    )


def assignments(text: str) -> Iterator[Span]:
    """Secrets assigned to password-, secret- and key-like names (KeywordDetector), line by line."""
    plugin = _plugins()["keyword"]
    offset = 0
    for line in text.splitlines(keepends=True):
        work = line
        for _ in range(20):
            found = False
            for mapping in _keyword_maps():
                for value in plugin.analyze_string(work, denylist_regex_to_group=mapping):
                    value = str(value)
                    quoted = any(f"{q}{value}{q}" in work for q in "\"'`")
                    if not quoted:
                        value = value.split()[0] if value.split() else ""
                        value = value.rstrip(_TRAILING)
                    position = work.find(value) if value else -1
                    if not value or position < 0:
                        continue
                    if len(value) >= 2 and not _not_a_value(value):
                        yield offset + position, offset + position + len(value)
                    work = work[:position] + MASK * len(value) + work[position + len(value) :]
                    found = True
            if not found:
                break
        offset += len(line)


_TOKENS = re.compile(
    r"(?i)(?:\bbearer\s+|\b(?:authorization|x-api-key|api-key)\s*[:=]\s*(?:bearer\s+|token\s+|basic\s+)?"
    r"|\b[\w-]*(?:token|passphrase|credentials?|apikey)\b[\"']?\s*[:=]\s*[\"']?)"
    r"([A-Za-z0-9\-._~+/]{6,}=*)"
)


def bearer_tokens(text: str) -> Iterator[Span]:
    for match in _TOKENS.finditer(text):
        value = match.group(1).rstrip(".")
        if any(c.isdigit() for c in value) or len(value) >= 16:
            yield match.start(1), match.start(1) + len(value)


# -- people and places -----------------------------------------------------------------------------
emails = _regex(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
user_at_host = _regex(r"(?<![\w.@-])[A-Za-z_][\w.-]*@[A-Za-z0-9][\w-]*(?:\.[\w-]+)*(?![\w@-])")

_V4 = re.compile(r"(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?:/\d{1,2})?(?::\d{1,5})?(?!\w|\.\d)")
_V6 = re.compile(r"(?<![\w:.])((?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%\w+)?)(?:/\d{1,3})?(?![\w:])")
_NOT_IPS = {"0.0.0.0", "127.0.0.1", "::", "::1"}
_VERSION_BEFORE = re.compile(r"(?i)(?:\bv|version\s*|==|>=|<=|~=)$")


def ip_addresses(text: str) -> Iterator[Span]:
    """Public IPv4 (detect-secrets' IPPublicDetector), private IPv4 and IPv6; not 127.0.0.1, 0.0.0.0
    or a dotted version (``v1.2.3.4``, ``==1.2.3.4``)."""
    spans: set[Span] = set()
    for regex in _plugins()["ip_public"].denylist:
        spans.update(match.span(1) for match in regex.finditer(text))
    for match in _V4.finditer(text):
        spans.add(match.span())
    for start, end in sorted(spans):
        address = text[start:end].split("/")[0].split(":")[0]
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            continue
        if address in _NOT_IPS or _VERSION_BEFORE.search(text[max(0, start - 9) : start]):
            continue
        yield start, end
    for match in _V6.finditer(text):
        address = match.group(1).split("%")[0]
        if address.count(":") < 2 or address in _NOT_IPS:
            continue
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            continue
        yield match.span()


_PATH_CHARS = r"[\w.@+%,=~-]"
_ROOTS = (
    "home|Users|root|etc|var|usr|opt|tmp|srv|mnt|media|Volumes|private|proc|dev|sys|run|snap|bin|sbin|lib|data|"
    "workspace|workspaces|code|src|app|nix|Library|Applications"
)
paths_detectors: list[Detector] = [
    _regex(r"\bfile://\S+"),
    _regex(rf"(?<![\w/\\])~{_PATH_CHARS}*(?:/{_PATH_CHARS}+)+/?"),  # ~/x, ~alice/x
    _regex(rf"(?i)(?:\$HOME|\$\{{HOME\}}|%USERPROFILE%|%APPDATA%|%HOMEPATH%)(?:[/\\]{_PATH_CHARS}+)*[/\\]?"),
    _regex(r"(?<![\w\\])[A-Za-z]:\\(?:[^\\\s\"'<>|?*]+\\?)*"),  # C:\Users\x
    _regex(r"(?<![\w\\])[A-Za-z]:/(?:[\w .@+%-]+/)*[\w.@+%-]*"),  # C:/Users/x
    _regex(r"\\\\[\w.-]+\\[^\s\"'<>|]+"),  # \\server\share
    _regex(rf"(?<![\w:/.~\\\]\)}}>-])/(?:{_PATH_CHARS}+/)+{_PATH_CHARS}*"),  # /a/b…
    _regex(rf"(?<![\w:/.~\\\]\)}}>-])/(?:{_ROOTS})(?![\w.-])/?"),  # /etc, /home
]


def config_names(config: BridgeConfig | None) -> tuple[Detector, Detector]:
    """Detectors for the host names and the project names listed in ``config`` (None: none listed)."""
    listed_hosts, listed_projects = (config.hostnames, config.projects) if config is not None else ((), ())
    hosts = [re.escape(name) for name in listed_hosts]
    internal = r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:internal|local|lan|corp|intranet|localdomain|home\.arpa)"
    host_pattern = "|".join([*(rf"(?:[A-Za-z0-9-]+\.)*{h}" for h in hosts), internal])
    host = _regex(rf"(?i)(?<![\w.-])(?:{host_pattern})(?![\w-]|\.\w)")
    if not listed_projects:
        return host, lambda text: iter(())
    projects = "|".join(re.escape(name) for name in listed_projects)
    return host, _regex(rf"(?i)(?<![\w-])(?:{projects})(?![\w-])")


# -- long random strings ----------------------------------------------------------------------------
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{20,}")
_SEGMENT = re.compile(r"[_\-/+=.]+")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")


def _entropy(charset: str, data: str) -> float:
    if not data:
        return 0.0
    total = 0.0
    for char in set(data):
        if char in charset:
            p = data.count(char) / len(data)
            total -= p * math.log2(p)
    return total


def _identifier_like(token: str) -> bool:
    """A long name made of words and small numbers (``test_sentence_transformers_v2``)."""
    for segment in _SEGMENT.split(token):
        if not segment or segment.isalpha() or (segment.isdigit() and len(segment) <= 4):
            continue
        if len(segment) <= 6 and re.fullmatch(r"[A-Za-z]+\d{1,3}|[A-Za-z]\d[A-Za-z]?|\d{1,3}[A-Za-z]{1,3}", segment):
            continue
        return False
    return True


def high_entropy(text: str) -> Iterator[Span]:
    """Long random-looking strings, measured with detect-secrets' entropy: 32+ hex digits above
    the hex plugin's limit (3.0), or 20+ base64/url-safe characters mixing letters and digits that
    are not a name made of words, above a limit that grows with the length (a 20-character string
    cannot reach the base64 plugin's 4.5 bits, which is meant for 40+)."""
    plugins = _plugins()
    hex_plugin, b64_plugin = plugins["hex"], plugins["base64"]
    for match in _CANDIDATE.finditer(text):
        token = match.group().strip("-_=/+")
        start = match.start() + match.group().find(token)
        digits = sum(c.isdigit() for c in token)
        if _HEX.match(token):
            if sum(c != "-" for c in token) >= 32 and _entropy(hex_plugin.charset, token.replace("-", "")) > 3.0:
                yield start, start + len(token)
            continue
        if digits == 0 or digits == len(token) or _identifier_like(token):
            continue
        limit = min(b64_plugin.entropy_limit, 0.8 * math.log2(len(token)) + 0.1)
        if _entropy(b64_plugin.charset, token) >= limit:
            yield start, start + len(token)


__all__ = [
    "MASK",
    "Detector",
    "Span",
    "assignments",
    "bearer_tokens",
    "config_names",
    "emails",
    "high_entropy",
    "ip_addresses",
    "jwts",
    "paths_detectors",
    "private_key_blocks",
    "provider_keys",
    "url_credentials",
    "user_at_host",
]
