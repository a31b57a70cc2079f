"""Java ``.properties`` text, read as ``java.util.Properties.load`` does, into a dict of strings.

Only the syntax lives here; what the keys mean is the key tables' business (``_broker.py``).
"""

from __future__ import annotations

import re

from ._errors import ConfigError

__all__ = ["parse_properties"]

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules) into a dict.

    Handles ``#``/``!`` comment lines, ``key=value``, ``key: value`` and ``key value``,
    backslash line continuations (leading blanks of the next line dropped), ``\\uXXXX`` and
    ``\\t \\n \\r \\f`` escapes (any other escaped character stands for itself) and blanks
    around the separator. Values keep trailing blanks, as in Java.

    Raises ConfigError naming ``source`` and the line for a malformed ``\\u`` escape, and naming
    both line numbers for a key given twice (Java would silently keep the last).
    """
    result: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, logical in _logical_lines(text):
        key_end, value_start = _split_key(logical)
        key = _unescape(logical[:key_end], lineno, source)
        value = _unescape(logical[value_start:], lineno, source)
        if key in first_line:
            raise ConfigError(f"duplicate key on lines {first_line[key]} and {lineno}", key=key, source=source)
        first_line[key] = lineno
        result[key] = value
    return result


def _logical_lines(text: str) -> list[tuple[int, str]]:
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment: a trailing backslash does not continue a comment
        while _continues(line):
            line = line[:-1]
            if i == len(natural):
                break  # a continuation at end of input is dropped, as Java does
            line += natural[i].lstrip(_BLANKS)
            i += 1
        out.append((start + 1, line))
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key(line: str) -> tuple[int, int]:
    """(end of the key, start of the value), honouring escaped separators in the key."""
    escaped = False
    key_end = len(line)
    has_separator = False
    for pos, char in enumerate(line):
        if not escaped and char in "=:":
            key_end, has_separator = pos, True
            break
        if not escaped and char in _BLANKS:
            key_end = pos
            break
        escaped = char == "\\" and not escaped
    value_start = key_end + 1 if key_end < len(line) else key_end
    while value_start < len(line):
        char = line[value_start]
        if char in _BLANKS:
            value_start += 1
        elif not has_separator and char in "=:":
            has_separator = True
            value_start += 1
        else:
            break
    return key_end, value_start


def _unescape(raw: str, lineno: int, source: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    pos = 0
    while pos < len(raw):
        char = raw[pos]
        pos += 1
        if char != "\\" or pos == len(raw):
            if char != "\\":
                out.append(char)
            continue
        char = raw[pos]
        pos += 1
        if char == "u":
            digits = raw[pos : pos + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ConfigError(f"line {lineno}: malformed \\uXXXX escape '\\u{digits}'", source=source)
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(char, char))
    text = "".join(out)
    try:  # two \u escapes may form a UTF-16 surrogate pair: join them into one character
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise ConfigError(f"line {lineno}: unpaired UTF-16 surrogate in a \\u escape", source=source) from None
