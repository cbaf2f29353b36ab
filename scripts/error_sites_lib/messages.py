"""Parsing a macro call's arguments and rendering its message: string literals concatenated, with … where a value goes."""

import re

from error_sites_lib.settings import ELLIPSIS


CONSTANTS = {}  # name -> the string a `const char* const kName = "...";` (or constexpr string_view) holds


# ---- parsing calls and rendering messages -------------------------------------------------------------------

def call_args(mask, open_pos):
    """The top-level argument spans of the call whose '(' is at open_pos, and the index of its ')'."""
    depth, start, spans = 0, open_pos + 1, []
    i = open_pos
    n = len(mask)
    while i < n:
        c = mask[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                if mask[start:i].strip() or spans:
                    spans.append((start, i))
                return spans, i
        elif c == "," and depth == 1:
            spans.append((start, i))
            start = i + 1
        i += 1
    return spans, n


def strip_span(mask, s, e):
    while s < e and mask[s].isspace():
        s += 1
    while e > s and mask[e - 1].isspace():
        e -= 1
    return s, e


def top_level_split(mask, s, e, sep):
    """Split [s, e) at top-level `sep` characters (',' or '+'); '+' only as a binary operator."""
    parts, depth, start = [], 0, s
    i = s
    while i < e:
        c = mask[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            if sep == "+":
                prev = mask[start:i].rstrip()
                nxt = mask[i + 1] if i + 1 < e else ""
                if nxt in "+=" or (i > 0 and mask[i - 1] == "+") or not prev or prev[-1] in "=(,+-*/<>!&|?:":
                    i += 1
                    continue
            parts.append((start, i))
            start = i + 1
        i += 1
    parts.append((start, e))
    return parts


CALL_HEAD = re.compile(r"\s*((?:::)?[A-Za-z_][\w]*(?:\s*::\s*[A-Za-z_]\w*)*)\s*(?:<[^()]*>)?\s*\(")
NUMBER = re.compile(r"-?(?:0[xX][0-9a-fA-F']+|\d[\d']*(?:\.\d+)?)[uUlLfF]*")
PARAM = re.compile(r"([A-Za-z_]\w*)\s*(\.\.\.)?")


class Renderer:
    def __init__(self, src, params=()):
        self.src = src
        self.params = set(params)

    def render(self, s, e):
        """Segments of the string the expression [s, e) makes: ('lit', text) | ('ph',) | ('param', name, pack)."""
        mask, code = self.src.mask, self.src.code
        s, e = strip_span(mask, s, e)
        if s >= e:
            return []
        text = mask[s:e]
        lits = self.src.literals_in(s, e)
        if lits and only_literals(code, s, e, lits):  # adjacent string literals concatenate
            return [("lit", "".join(lit[2] for lit in lits))]
        parts = top_level_split(mask, s, e, "+")
        if len(parts) > 1:  # string + string: only where a part is a string literal, and not in a ?:
            if not top_level_split(mask, s, e, "?")[1:] and any('"' in mask[a:b] for a, b in parts):
                out = []
                for a, b in parts:
                    out += self.render(a, b) if '"' in mask[a:b] or not NUMBER.fullmatch(mask[a:b].strip()) \
                        else [("ph",)]
                return out
            return [("ph",)]
        m = CALL_HEAD.match(text)
        if m:
            name = re.sub(r"\s+", "", m.group(1))
            open_pos = s + m.end() - 1
            spans, close = call_args(mask, open_pos)
            if close == e - 1:
                last = name.split("::")[-1]
                if last == "concat":
                    out = []
                    for a, b in spans:
                        out += self.render(a, b)
                    return out
                if last == "format" and spans:
                    first = self.render(*spans[0])
                    if len(first) == 1 and first[0][0] == "lit":
                        return format_segments(first[0][1])
                    return [("ph",)]
                if last in ("string", "string_view") and len(spans) == 1:
                    inner = self.render(*spans[0])
                    if len(inner) == 1 and inner[0][0] == "lit":
                        return inner
        stripped = text.strip()
        if NUMBER.fullmatch(stripped):
            return [("lit", stripped.replace("'", ""))]
        pm = PARAM.fullmatch(stripped)
        if pm and pm.group(1) in self.params:
            return [("param", pm.group(1), bool(pm.group(2)))]
        cm = re.fullmatch(r"(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)", stripped)
        if cm and CONSTANTS.get(cm.group(1)):
            return [("lit", CONSTANTS[cm.group(1)])]
        return [("ph",)]

    def render_args(self, spans):
        out = []
        for a, b in spans:
            out += self.render(a, b)
        return out


def only_literals(code, s, e, lits):
    pos = s
    for lit in lits:
        if code[pos:lit[0]].strip():
            return False
        pos = lit[1]
    return not code[pos:e].strip()


def format_segments(fmt):
    out, i, buf = [], 0, []
    while i < len(fmt):
        if fmt.startswith("{{", i) or fmt.startswith("}}", i):
            buf.append(fmt[i])
            i += 2
        elif fmt[i] == "{":
            j = fmt.find("}", i)
            j = len(fmt) - 1 if j < 0 else j
            if buf:
                out.append(("lit", "".join(buf)))
                buf = []
            out.append(("ph",))
            i = j + 1
        else:
            buf.append(fmt[i])
            i += 1
    if buf:
        out.append(("lit", "".join(buf)))
    return out


def normalize(segs):
    """Adjacent literals merged, adjacent values merged, empty literals dropped."""
    out = []
    for seg in segs:
        if seg[0] == "lit":
            if not seg[1]:
                continue
            if out and out[-1][0] == "lit":
                out[-1] = ("lit", out[-1][1] + seg[1])
                continue
        elif seg[0] == "ph" and out and out[-1][0] == "ph":
            continue
        out.append(seg)
    return out


def message_text(segs):
    out = []
    for seg in segs:
        if seg[0] == "lit":
            out.append(seg[1])
        elif not out or out[-1] != ELLIPSIS:
            out.append(ELLIPSIS)
    return "".join(out)


def one_line(text):
    return re.sub(r"\s+", " ", text).strip()


def shorten(text, limit):
    return text if len(text) <= limit else text[:limit - 1].rstrip() + ELLIPSIS


def code_span(text):
    if "`" in text:
        return "`` " + text + " ``"
    return "`" + text + "`"
