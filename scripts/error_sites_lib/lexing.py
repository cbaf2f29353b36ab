"""Lexing C++ sources: a mask with string literals, comments and preprocessor lines blanked, and the literals' decoded
texts."""

import os
import re
import bisect

from error_sites_lib.settings import ROOT


# ---- lexing -------------------------------------------------------------------------------------------------

BRACE = re.compile(r"[{}]")
BRACKET = re.compile(r"[()\[\]{}]")


class Source:
    """A file with comments and preprocessor lines blanked (`code`), and with literal contents blanked too
    (`mask`, quotes kept, for finding structure); `lits` are the string and char literals in order."""

    def __init__(self, path, text):
        self.path = path
        self.text = text
        code, mask, lits = lex(text)
        self.code = code
        self.mask = mask
        self.lits = lits  # (start, end, value, is_char)
        self.lit_starts = [lit[0] for lit in lits]
        self._pairs = None

    def literals_in(self, start, end):
        i = bisect.bisect_left(self.lit_starts, start)
        out = []
        while i < len(self.lits) and self.lits[i][0] < end:
            out.append(self.lits[i])
            i += 1
        return out

    def brace_pairs(self):
        """open -> close for every brace; and the parent of every open."""
        if self._pairs is None:
            close, parent, stack = {}, {}, []
            for m in BRACE.finditer(self.mask):
                i, c = m.start(), m.group()
                if c == "{":
                    parent[i] = stack[-1] if stack else None
                    stack.append(i)
                elif c == "}" and stack:
                    close[stack.pop()] = i
            self._pairs = (close, parent, sorted(close))
        return self._pairs

    def innermost_brace(self, pos):
        close, parent, opens = self.brace_pairs()
        i = bisect.bisect_right(opens, pos) - 1
        while i >= 0:
            o = opens[i]
            if close[o] > pos:
                return o
            # the innermost enclosing brace is an ancestor of this one
            p = parent[o]
            while p is not None and close[p] < pos:
                p = parent[p]
            return p
        return None


ESCAPES = {'"': '"', "'": "'", "\\": "\\", "?": "?"}


def decode(body):
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            out.append(ESCAPES.get(n, "\\" + n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


INTEREST = re.compile(r"[\"'#]|//|/\*")
STRING_BODY = re.compile(r'(?:[^"\\\n]|\\.)*')
CHAR_BODY = re.compile(r"(?:[^'\\\n]|\\.)*")
NOT_NEWLINE = re.compile(r"[^\n]")
PREFIX = re.compile(r"[A-Za-z0-9_]*$")
RAW_PREFIXES = ("R", "u8R", "uR", "UR", "LR")
PREFIXES = RAW_PREFIXES + ("u8", "u", "U", "L")


def lex(text):
    n = len(text)
    code = list(text)
    mask = list(text)
    lits = []

    def blank(a, b, both=True):
        spaces = NOT_NEWLINE.sub(" ", text[a:b])
        mask[a:b] = spaces
        if both:
            code[a:b] = spaces

    i = 0
    while True:
        m = INTEREST.search(text, i)
        if not m:
            break
        i = m.start()
        c = m.group()
        if c == "#":
            if text[text.rfind("\n", 0, i) + 1:i].strip():
                i += 1  # not a preprocessor line
                continue
            j = i
            while True:  # a preprocessor line, with its continuations
                j = text.find("\n", j)
                if j < 0:
                    j = n
                    break
                if text[j - 1] != "\\":
                    break
                j += 1
            blank(i, j)
            i = j
        elif c == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"':
            prefix = PREFIX.search(text, max(0, i - 8), i).group()
            if prefix in RAW_PREFIXES:
                paren = text.find("(", i)
                delim = text[i + 1:paren]
                end_marker = ")" + delim + '"'
                j = text.find(end_marker, paren)
                j = n if j < 0 else j
                value = text[paren + 1:j]
                end = min(n, j + len(end_marker))
            else:
                j = STRING_BODY.match(text, i + 1).end()
                value = decode(text[i + 1:j])
                end = min(n, j + 1)
            lits.append((i - len(prefix) if prefix in PREFIXES else i, end, value, False))
            blank(i + 1, end - 1, both=False)
            i = end
        else:  # '
            prefix = PREFIX.search(text, max(0, i - 64), i).group()
            if prefix[:1].isdigit():  # a digit separator: 1'000
                i += 1
                continue
            j = CHAR_BODY.match(text, i + 1).end()
            lits.append((i, min(n, j + 1), decode(text[i + 1:j]), True))
            blank(i + 1, j, both=False)
            i = j + 1
    return "".join(code), "".join(mask), lits


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()
