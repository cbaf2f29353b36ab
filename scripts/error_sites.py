#!/usr/bin/python3
"""Every place dtr raises an error, and the tests that name its message: docs/error-sites.md.

    scripts/error_sites.py > docs/error-sites.md      # regenerate
    scripts/error_sites.py --check docs/error-sites.md  # exit 1 (with a diff) when it is not current

Scans the library's sources (SOURCE_DIRS; .cpp .h .cu .cuh; never tests/, bench/, fuzz/, build/) for throw
sites: DTR_THROW(Type, ...), DTR_CHECK(cond, Type, ...), DTR_CHECK_SHAPES(cond, op, inputs, ...) (ShapeError),
DTR_CUDA_CHECK / DTR_CUDA_CHECK_LAUNCH / DTR_CUBLAS_CHECK / DTR_CUDNN_CHECK (DeviceError, one row per file and
macro), `throw T(...)` of dtr's error types and of std:: or CLI11 exceptions, and `throw helper(...)` of a
function returning a dtr error. Calls of a [[noreturn]] helper or a throwing lambda whose message takes its
arguments (the trace reader's fail("...")) are sites of their own, in place of the helper's generic throw.
Macro calls are parsed with balanced parentheses and string literals, so they may span lines; comments and
preprocessor lines are ignored.

A site's message is its string literals concatenated (through detail::concat, fmt::format, + and string
constants), with … where a value goes. Its tests are the TEST / TEST_F / TEST_P bodies under tests/ (*.cpp
and *.c, recursively; a literal outside any test counts for its file) with a string literal, or a brace list
of literals alone (the parts expect_error looks for), that a message of the site could contain: at least
MIN_MATCH characters of the site's own text, in order, with values (at most GAP characters each) between;
see match_score. A heuristic: it finds the tests that spell a message out, not the ones that only check the
type. `--explain REGEX` prints the literal behind each test of the sites matching REGEX.

Standard library only; deterministic (sorted files, no dates, no hash order); about two seconds.
"""

import argparse
import bisect
import difflib
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ["common", "allocator", "heuristics", "kernels", "runtime", "nn", "sim", "train", "tools", "include",
               "dtr_torch"]
SOURCE_EXTS = (".cpp", ".h", ".cu", ".cuh")
SKIP_DIRS = {"tests", "bench", "fuzz", "build"}
TEST_DIR = "tests"
REGENERATE = "scripts/error_sites.py > docs/error-sites.md"

DTR_TYPES = ["Error", "InvalidArgument", "ConfigError", "ShapeError", "TraceError", "Thrashing", "IoError",
             "DeviceError", "OutOfMemory"]
OTHER_TYPES = {  # exceptions of other families thrown from the library's sources
    "std::runtime_error", "std::logic_error", "std::invalid_argument", "std::out_of_range", "std::length_error",
    "std::domain_error", "std::overflow_error", "std::system_error", "std::bad_alloc", "CLI::ValidationError",
    "CLI::ParseError", "CLI::ConversionError", "CLI::RuntimeError", "CLI::CallForHelp",
}
DEVICE_MACROS = {  # macro -> (what fails, message)
    "DTR_CUDA_CHECK": ("a CUDA runtime call fails", "<call> failed: <cudaGetErrorName>: <cudaGetErrorString>"),
    "DTR_CUDA_CHECK_LAUNCH": ("a kernel launch fails (cudaGetLastError)",
                              "cudaGetLastError() failed: <cudaGetErrorName>: <cudaGetErrorString>"),
    "DTR_CUBLAS_CHECK": ("a cuBLAS call fails", "<call> failed: <cublasGetStatusName>: <cublasGetStatusString>"),
    "DTR_CUDNN_CHECK": ("a cuDNN call fails", "<call> failed: <cudnnGetErrorString>"),
}
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype", "static_assert",
            "noexcept", "requires", "throw", "new", "delete", "case", "do", "else", "try"}
MESSAGE_CHARS = 160
TRIGGER_CHARS = 90
MIN_MATCH = 10  # literal characters of a message a test literal must match
GAP = 48  # the most characters a value (…) stands for when matching
GENERIC = 8  # a text in more sites' messages than this does not make a list of parts name a site
GRAM = 5
MAX_TESTS_SHOWN = 4
ELLIPSIS = "\u2026"


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


# ---- function names and triggers ----------------------------------------------------------------------------

NAME_BEFORE = re.compile(r"((?:~?[A-Za-z_]\w*\s*(?:<[^<>;{}()]*>)?\s*::\s*)*(?:operator\s*[^\s(]+|~?[A-Za-z_]\w*))\s*$")
CLASS_HEAD = re.compile(r"\b(class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)")


def head_of(src, open_pos):
    """The text (mask) before a '{' back to the previous statement; None when the brace is inside parentheses."""
    mask = src.mask
    depth = 0
    i = open_pos - 1
    while i >= 0:
        c = mask[i]
        if c in ")]":
            depth += 1
        elif c in "([":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and c in ";{}":
            break
        i -= 1
    return mask[i + 1:open_pos]


def classify_head(head):
    """('function', name) | ('class', name) | ('if', cond-span-in-head) | ('else',) | ('catch', text) | (other,)."""
    if head is None:
        return ("expr",)
    h = re.sub(r"^\s*(?:(?:public|private|protected)\s*:|case\b[^:]*:|default\s*:)\s*", "", head)
    h = re.sub(r"template\s*<[^{};]*?>\s*(?=[A-Za-z_\[])", "", h, count=1)
    h = re.sub(r"\b(?:decltype|alignas)\s*\([^()]*\)", "", h)  # decltype(auto) f(...)
    stripped = h.strip()
    if not stripped:
        return ("block",)
    if re.fullmatch(r"else", stripped):
        return ("else",)
    m = CLASS_HEAD.search(stripped)
    if m and "(" not in stripped[:m.start()] and "=" not in stripped:
        return ("class", m.group(2))
    # first top-level '('
    depth, first = 0, None
    for i, c in enumerate(stripped):
        if c == "(" and depth == 0:
            first = i
            break
        if c in "[{<":
            depth += 1 if c != "<" else 0
        elif c in "]}":
            depth -= 1
    if first is None:
        return ("block",)
    before = stripped[:first]
    if before.rstrip().endswith("]") or before.rstrip().endswith("=") or "=" in re.sub(r"operator\s*\S+", "", before):
        return ("lambda",)
    nm = NAME_BEFORE.search(before)
    if not nm:
        return ("block",)
    name = re.sub(r"\s+", "", nm.group(1))
    last = name.split("::")[-1]
    if last in ("if",) or re.search(r"\belse\s+if\s*$", before):
        return ("if",)
    if last == "catch":
        return ("catch", one_line(stripped[first:]).strip("() "))
    if last in KEYWORDS:
        return ("block",)
    return ("function", name)


def enclosing_function(src, pos):
    o = src.innermost_brace(pos)
    parent = src.brace_pairs()[1]
    name = None
    while o is not None:
        kind = classify_head(head_of(src, o))
        if name is None and kind[0] == "function":
            name = kind[1]
        elif name is not None:
            if kind[0] == "class" and "::" not in name:
                name = kind[1] + "::" + name
            break
        o = parent[o]
    return name


def condition_before(src, pos):
    """The `if` condition (or else / catch) that guards the statement at pos, if it is near."""
    mask = src.mask
    i = pos - 1
    while i >= 0 and mask[i].isspace():
        i -= 1
    if i >= 0 and mask[i] == "{":  # the first statement of a block: the block's guard
        kind = classify_head(head_of(src, i))
        return guard_text(src, i, kind)
    if i >= 0 and mask[i] == ")":
        depth, j = 0, i
        while j >= 0:
            if mask[j] == ")":
                depth += 1
            elif mask[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        word = re.search(r"([A-Za-z_]\w*)\s*$", mask[:j])
        if word and word.group(1) == "if":
            return "if " + code_span(shorten(one_line(src.code[j + 1:i]), TRIGGER_CHARS))
        return None
    word = re.search(r"([A-Za-z_]\w*)\s*$", mask[:i + 1])
    if word and word.group(1) == "else":
        return "otherwise (else)"
    if i >= 0 and mask[i] == ":":
        m = re.search(r"\b(case\s+[^:;{}]+|default)\s*:$", src.code[:i + 1])
        if m:
            return code_span(one_line(m.group(1)))
    o = src.innermost_brace(pos)
    if o is not None:
        return guard_text(src, o, classify_head(head_of(src, o)))
    return None


def guard_text(src, open_pos, kind):
    if kind[0] == "if":
        head_start = open_pos - len(head_of(src, open_pos))
        head = src.code[head_start:open_pos]
        m = re.search(r"\bif\s*(?:constexpr\s*)?\(", head)
        if m:
            a = head_start + m.end() - 1
            _, close = call_args(src.mask, a)
            return "if " + code_span(shorten(one_line(src.code[a + 1:close]), TRIGGER_CHARS))
    if kind[0] == "else":
        return "otherwise (else)"
    if kind[0] == "catch":
        return "catching " + code_span(shorten(kind[1], TRIGGER_CHARS))
    return None


# ---- sites ---------------------------------------------------------------------------------------------------

class Site:
    def __init__(self, path, pos, kind, etype, segs, trigger, function, count=1, note=None):
        self.path = path
        self.pos = pos
        self.kind = kind
        self.type = etype
        self.segs = normalize(segs)
        self.trigger = trigger
        self.function = function
        self.count = count
        self.note = note
        self.tests = []


SITE_RE = re.compile(r"\b(DTR_THROW|DTR_CHECK_SHAPES|DTR_CHECK|DTR_CUDA_CHECK_LAUNCH|DTR_CUDA_CHECK|DTR_CUBLAS_CHECK"
                     r"|DTR_CUDNN_CHECK)\s*\(|\bthrow\b")
TYPE_RE = re.compile(r"\s*((?:::)?[A-Za-z_]\w*(?:\s*(?:::|\.|->)\s*[A-Za-z_]\w*)*)\s*([({])")
NORETURN_RE = re.compile(r"\[\[[^\]]*\bnoreturn\b[^\]]*\]\]\s*(?:(?:static|inline|virtual|constexpr)\s+)*void\s+"
                         r"((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")
LAMBDA_RE = re.compile(r"\bauto\s+([A-Za-z_]\w*)\s*=\s*\[[^\]]*\]\s*\(")
RETURNS_ERROR_RE = re.compile(r"\b(?:dtr::)?(" + "|".join(DTR_TYPES) + r")\s+((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")


def clean_type(name):
    name = re.sub(r"\s+", "", name)
    name = re.sub(r"^(::)?dtr::", "", name)
    return name.lstrip(":")


def code_span(text):
    if "`" in text:
        return "`` " + text + " ``"
    return "`" + text + "`"


def find_sources():
    files = []
    for top in SOURCE_DIRS:
        base = os.path.join(ROOT, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for f in filenames:
                if f.endswith(SOURCE_EXTS):
                    files.append(os.path.relpath(os.path.join(dirpath, f), ROOT).replace(os.sep, "/"))
    return sorted(files)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


class Helper:
    """A [[noreturn]] function (or one returning a dtr error) and the message it throws."""

    def __init__(self, name, src, open_paren, body_open, noreturn):
        self.name = name
        self.src = src
        self.noreturn = noreturn
        spans, _ = call_args(src.mask, open_paren)
        self.params = []
        self.pack = set()
        for a, b in spans:
            decl = src.mask[a:b].split("=")[0]
            m = re.search(r"(\.\.\.)?\s*([A-Za-z_]\w*)\s*(?:\[\s*\])?\s*$", decl)
            if m:
                self.params.append(m.group(2))
                if m.group(1) or "..." in decl:
                    self.pack.add(m.group(2))
        self.body = (body_open, src.brace_pairs()[0].get(body_open, body_open))
        self.scope = None  # where its calls may be: a lambda's, after it in the function that defines it
        self.sites = []  # filled by scan_file
        self.type = None
        self.segs = None


def find_helpers(sources):
    """Functions that throw for their callers: [[noreturn]] ones with a body, and ones that return a dtr error."""
    helpers = defaultdict(list)
    for src in sources:
        for regex, noreturn in ((NORETURN_RE, True), (RETURNS_ERROR_RE, False)):
            for m in regex.finditer(src.mask):
                name = m.group(1) if noreturn else m.group(2)
                open_paren = m.end() - 1
                _, close = call_args(src.mask, open_paren)
                rest = src.mask[close + 1:]
                after = re.match(r"[\w\s:&]*?(?:noexcept\s*(?:\([^)]*\))?)?\s*\{", rest)
                if not after:
                    # a declaration; its definition is found by its own match (without [[noreturn]] there)
                    if noreturn:
                        helpers[name.split("::")[-1]].append(("decl", src, m.start()))
                    continue
                body_open = close + 1 + after.end() - 1
                h = Helper(name, src, open_paren, body_open, noreturn)
                if not noreturn:
                    h.type = m.group(1)
                helpers[name.split("::")[-1]].append(h)
    # lambdas that throw for their callers: auto fail = [&](std::string_view why) { DTR_THROW(..., why); };
    for src in sources:
        for m in LAMBDA_RE.finditer(src.mask):
            _, close = call_args(src.mask, m.end() - 1)
            after = re.match(r"[\w\s:&<>,*]*?(?:->[^{;]*)?\{", src.mask[close + 1:])
            if not after:
                continue
            h = Helper(m.group(1), src, m.end() - 1, close + 1 + after.end() - 1, True)
            o = src.innermost_brace(m.start())
            h.scope = (h.body[1], src.brace_pairs()[0].get(o, len(src.mask))) if o is not None else None
            helpers[m.group(1)].append(h)
    # definitions of [[noreturn]] functions declared elsewhere (void X::name(...) { ... })
    for short, entries in list(helpers.items()):
        if not any(isinstance(e, tuple) for e in entries):
            continue
        if any(isinstance(e, Helper) and e.noreturn for e in entries):
            continue
        pat = re.compile(r"\bvoid\s+((?:[A-Za-z_]\w*::)*" + re.escape(short) + r")\s*\(")
        for src in sources:
            for m in pat.finditer(src.mask):
                _, close = call_args(src.mask, m.end() - 1)
                after = re.match(r"[\w\s:&]*?(?:noexcept\s*(?:\([^)]*\))?)?\s*\{", src.mask[close + 1:])
                if after:
                    helpers[short].append(Helper(m.group(1), src, m.end() - 1, close + 1 + after.end() - 1, True))
    return {k: [e for e in v if isinstance(e, Helper)] for k, v in helpers.items()}


def helper_of(site_pos, src, helpers):
    for hs in helpers.values():
        for h in hs:
            if h.src is src and h.body[0] < site_pos < h.body[1]:
                return h
    return None


def scan_file(src, helpers, returners):
    sites = []
    mask, code = src.mask, src.code
    device = {}
    for m in SITE_RE.finditer(mask):
        pos = m.start()
        macro = m.group(1)
        if macro in DEVICE_MACROS:
            if macro not in device:
                what, message = DEVICE_MACROS[macro]
                device[macro] = Site(src.path, pos, macro, "DeviceError", [("lit", message)],
                                     what, None, count=0)
                device[macro].functions = []
                sites.append(device[macro])
            site = device[macro]
            site.count += 1
            function = enclosing_function(src, pos)
            if function and function not in site.functions:
                site.functions.append(function)
            shown = site.functions[:3]
            site.function = ", ".join(shown) + (" +" + str(len(site.functions) - 3) if len(site.functions) > 3 else "")
            continue
        owner = helper_of(pos, src, helpers)
        rend = Renderer(src, owner.params if owner else ())
        function = enclosing_function(src, pos)
        if macro:
            spans, _ = call_args(mask, m.end() - 1)
            if macro == "DTR_THROW":
                etype = clean_type(code[slice(*spans[0])])
                segs = rend.render_args(spans[1:])
                trigger = condition_before(src, pos)
            elif macro == "DTR_CHECK":
                etype = clean_type(code[slice(*spans[1])])
                segs = rend.render_args(spans[2:])
                trigger = "unless " + code_span(shorten(one_line(code[slice(*spans[0])]), TRIGGER_CHARS))
            else:  # DTR_CHECK_SHAPES
                etype = "ShapeError"
                segs = [("lit", "op '")] + rend.render(*spans[1]) + [("lit", "' ")] + rend.render_args(spans[3:]) \
                    + [("lit", ", got "), ("ph",)]
                trigger = "unless " + code_span(shorten(one_line(code[slice(*spans[0])]), TRIGGER_CHARS))
            site = Site(src.path, pos, macro, etype, segs, trigger, function)
        else:  # throw ...
            rest = mask[m.end():]
            if re.match(r"\s*(?:[A-Za-z_][\w.:>-]*\s*)?;", rest):
                continue  # a rethrow, or `throw e;` of a caught exception
            tm = TYPE_RE.match(rest)
            if not tm:
                site = Site(src.path, pos, "throw", "?", [("ph",)], condition_before(src, pos), function,
                            note="an expression the script does not read: " + code_span(one_line(rest[:60])))
                sites.append(site)
                continue
            name = clean_type(tm.group(1))
            open_pos = m.end() + tm.end() - 1
            spans, _ = call_args(mask, open_pos)
            short = re.split(r"::|\.|->", name)[-1]
            if name in DTR_TYPES or name in OTHER_TYPES:
                if name.startswith("CLI::") and len(spans) >= 2:
                    segs = rend.render(*spans[0]) + [("lit", ": ")] + rend.render(*spans[1])
                else:
                    segs = rend.render(*spans[0]) if spans else []
                site = Site(src.path, pos, "throw", name, segs, condition_before(src, pos), function)
            elif short in returners:
                h = pick_returner(returners[short], src.path)
                site = Site(src.path, pos, "throw", h.type, h.segs or [("ph",)], condition_before(src, pos),
                            function, note="built by " + code_span(h.name + "()"))
            else:
                site = Site(src.path, pos, "throw", "?", [("ph",)], condition_before(src, pos), function,
                            note="throws " + code_span(name + "(…)") + ", a type the script does not know")
        if owner is not None:
            owner.sites.append(site)
        sites.append(site)
    return sites


def resolve_returners(helpers):
    """Helpers that return a dtr error: the message they build (`std::string message = ...` or inline)."""
    returners = {}
    for short, hs in helpers.items():
        for h in hs:
            if h.noreturn:
                continue
            src = h.src
            a, b = h.body
            body = src.mask[a:b]
            rend = Renderer(src)
            segs = None
            cm = re.search(r"\b(?:dtr::)?" + h.type + r"\s*[({]", body)
            if cm:
                spans, _ = call_args(src.mask, a + cm.end() - 1)
                if spans:
                    first = src.mask[slice(*spans[0])].strip()
                    var = re.fullmatch(r"(?:std::move\()?\s*([A-Za-z_]\w*)\s*\)?", first)
                    if var:
                        dm = re.search(r"\b(?:std::string|auto)\s+" + var.group(1) + r"\s*=", body)
                        if dm:
                            s = a + dm.end()
                            e = src.mask.find(";", s)
                            segs = rend.render(s, e) + [("ph",)]
                    else:
                        segs = rend.render(*spans[0])
            h.segs = segs
            returners.setdefault(short, []).append(h)
    return returners


def pick_returner(candidates, path):
    """The helper a `throw name(...)` in `path` calls: one of the same file, else of the same folder."""
    for same in (lambda h: h.src.path == path, lambda h: h.src.path.split("/")[0] == path.split("/")[0]):
        for h in candidates:
            if same(h):
                return h
    return candidates[0]


def expand_helper_calls(sources, helpers, sites_by_file):
    """Calls of a [[noreturn]] helper (or a throwing lambda) whose message takes a literal from its caller
    become sites, in place of the helper's own throw."""
    for short, hs in helpers.items():
        hs = [h for h in hs if h.noreturn and h.sites]
        if not hs:
            continue
        calls = []
        call_re = re.compile(r"(?<![\w:.>~])(?:[A-Za-z_]\w*::)*" + re.escape(short) + r"\s*\(")
        for src in sources:
            for m in call_re.finditer(src.mask):
                before = src.mask[max(0, m.start() - 80):m.start()]
                if re.search(r"\b(?:void|noreturn\]\])\s*(?:[A-Za-z_]\w*::)*$", before):
                    continue  # the definition or a declaration
                spans, _ = call_args(src.mask, m.end() - 1)
                calls.append((src, m.start(), spans))
        for h in hs:
            direct = [seg for site in h.sites for seg in site.segs if seg[0] == "param"]
            if not direct:
                continue
            mine = []
            for src, pos, spans in calls:
                if src is not h.src and (h.src.path.endswith(".cpp") or h.scope):
                    continue
                if h.scope and not h.scope[0] < pos < h.scope[1]:
                    continue
                if h.body[0] < pos < h.body[1]:
                    continue
                if not h.pack and len(spans) != len(h.params):
                    continue
                if len(hs) > 1 and src is h.src:  # overloads by class: the call must be in the helper's class
                    cls = class_of(src, h.body[0])
                    if cls is not None and not (cls[0] < pos < cls[1]):
                        continue
                mine.append((src, pos, spans))
            if not any(any(seg[0] == "lit" for a, b in spans for seg in Renderer(src).render(a, b))
                       for src, pos, spans in mine):
                continue
            for src, pos, spans in mine:
                rend = Renderer(src)
                args = {}
                for idx, p in enumerate(h.params):
                    if p in h.pack:
                        args[p] = rend.render_args(spans[idx:])
                        break
                    if idx < len(spans):
                        args[p] = rend.render(*spans[idx])
                for inner in reversed(h.sites):  # the helper's last throw: the general case
                    segs = []
                    for seg in inner.segs:
                        segs += args.get(seg[1], [("ph",)]) if seg[0] == "param" else [seg]
                    parts = [condition_before(src, pos), "via " + code_span(short + "()")]
                    if inner.trigger and inner.trigger.startswith("unless"):
                        parts.append(inner.trigger)  # a check inside the helper
                    site = Site(src.path, pos, "call", inner.type, segs, ", ".join(p for p in parts if p),
                                enclosing_function(src, pos))
                    sites_by_file[src.path].append(site)
                    break  # one row per call: the helper's last throw (the others differ by location only)
            for inner in h.sites:
                sites_by_file[inner.path].remove(inner)


def class_of(src, pos):
    close, parent, _ = src.brace_pairs()
    o = src.innermost_brace(pos)
    while o is not None:
        if classify_head(head_of(src, o))[0] == "class":
            return (o, close[o])
        o = parent[o]
    return None


CONSTANT_RE = re.compile(r"\b(?:constexpr|const)\b[^;={}()]*?\b([A-Za-z_]\w*)\s*=\s*(?=[uUL8R]*\")")
CONSTANTS = {}  # name -> the string a `const char* const kName = "...";` (or constexpr string_view) holds


def find_constants(sources):
    CONSTANTS.clear()
    for src in sources:
        for m in CONSTANT_RE.finditer(src.mask):
            end = src.mask.find(";", m.end())
            lits = src.literals_in(m.end(), end)
            if lits and only_literals(src.code, m.end(), end, lits):
                value = "".join(lit[2] for lit in lits)
                name = m.group(1)
                CONSTANTS[name] = value if CONSTANTS.get(name, value) == value else None  # None: ambiguous


def collect_sites():
    sources = [Source(p, read(p)) for p in find_sources()]
    find_constants(sources)
    helpers = find_helpers(sources)
    returners = resolve_returners(helpers)
    sites_by_file = defaultdict(list)
    for src in sources:
        sites_by_file[src.path] = scan_file(src, helpers, returners)
    expand_helper_calls(sources, helpers, sites_by_file)
    for path in sites_by_file:
        sites_by_file[path].sort(key=lambda s: s.pos)
    return {p: s for p, s in sorted(sites_by_file.items()) if s}


# ---- tests ---------------------------------------------------------------------------------------------------

TEST_RE = re.compile(r"\b(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")


def collect_test_literals():
    """Test literals -> the tests they are in: a key is a tuple of fragments, one string literal, or the
    literals of a brace list of literals alone ({"SGD", "'lr'", ">= 0"}: the parts expect_error looks for).
    A test is Suite.Name; a literal outside any test is `file (helpers)`."""
    by_value = defaultdict(set)
    base = os.path.join(ROOT, TEST_DIR)
    paths = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        paths += [os.path.join(dirpath, f) for f in filenames if f.endswith((".cpp", ".c"))]
    for path in sorted(paths):
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        src = Source(rel, read(rel))
        close, _, _ = src.brace_pairs()
        tests = []
        for m in TEST_RE.finditer(src.mask):
            o = m.end() - 1
            tests.append((o, close.get(o, len(src.mask)), m.group(2) + "." + m.group(3)))
        starts = [t[0] for t in tests]
        # adjacent literals are one
        merged = []
        for lit in src.lits:
            if lit[3]:
                continue
            if merged and not src.mask[merged[-1][1]:lit[0]].strip():
                merged[-1] = (merged[-1][0], lit[1], merged[-1][2] + lit[2])
            else:
                merged.append(lit[:3])
        # the innermost bracket around each
        inner, stack, k = [], [], 0
        for m in BRACKET.finditer(src.mask):
            i, c = m.start(), m.group()
            while k < len(merged) and merged[k][0] < i:
                inner.append(stack[-1] if stack else None)
                k += 1
            if c in "([{":
                stack.append(i)
            elif stack:
                stack.pop()
        inner += [None] * (len(merged) - len(inner))
        groups = defaultdict(list)
        for lit, o in zip(merged, inner):
            groups[o if o is not None and src.mask[o] == "{" else ("alone", lit[0])].append(lit)
        keys = []
        for o, lits in groups.items():
            if isinstance(o, int) and len(lits) > 1:
                rest, pos = [], o + 1
                for lit in lits:
                    rest.append(src.mask[pos:lit[0]])
                    pos = lit[1]
                rest.append(src.mask[pos:close.get(o, pos)])
                if not re.sub(r"[\s,]", "", "".join(rest)):
                    if sum(len(lit[2]) for lit in lits) >= MIN_MATCH:
                        keys.append((lits[0][0], tuple(lit[2] for lit in lits)))
                    continue
            for lit in lits:
                if len(lit[2]) >= MIN_MATCH and is_words(lit[2]):
                    keys.append((lit[0], (lit[2],)))
        for start, key in keys:
            i = bisect.bisect_right(starts, start) - 1
            if i >= 0 and tests[i][0] < start < tests[i][1]:
                by_value[key].add(tests[i][2])
            else:
                by_value[key].add(os.path.basename(rel) + (" (helpers)" if rel.endswith(".cpp") else ""))
    return by_value


def align(lit, pieces, lead=True, trail=True):
    """The best reading of `lit` as a substring of a message of pieces `pieces` (in order, a value of at most
    GAP characters between each, or before or after): (literal characters matched, longest whole piece in
    it, the literal texts matched), or None when it cannot be one. `lead`/`trail`: the message starts/ends
    with a value (else nothing of `lit` may come before its first piece or after its last)."""
    n = len(lit)
    best = None
    for i, p in enumerate(pieces):
        if n <= len(p) and lit in p:
            return (n, n, (lit,))
        starts = []
        k = min(len(p), n) - 1  # lit begins inside p: its longest start that p ends with
        last = p[-1]
        while k > 0:
            k = lit.rfind(last, 0, k) + 1
            if k > 0 and p.endswith(lit[:k]):
                starts.append((k, 0, [lit[:k]]))
                break
            k -= 1
        w = lit.find(p, 0, GAP + len(p))  # lit begins in the value before p
        if w >= 0 and (w == 0 or i > 0 or lead):
            starts.append((w + len(p), len(p), [p]))
        for pos, whole, texts in starts:
            j = i + 1
            while j < len(pieces):
                q = pieces[j]
                f = lit.find(q, pos, pos + GAP + len(q))
                if f >= 0:
                    pos = f + len(q)
                    texts.append(q)
                    whole = max(whole, len(q))
                    j += 1
                    continue
                k = min(len(q), n - pos)  # lit ends inside q: the longest start of q that lit ends with
                while k > 0:
                    k = q.rfind(lit[-1], 0, k) + 1
                    if k > 0 and lit.endswith(q[:k]) and n - k - pos <= GAP:
                        texts.append(q[:k])
                        pos = n
                        break
                    k -= 1
                break
            score = sum(len(t) for t in texts)
            if j == len(pieces) and pos < n and not trail:
                continue  # text after the message's end
            if n - pos <= GAP and (best is None or (score, whole) > best[:2]):
                best = (score, whole, tuple(texts))
    return best


def is_words(lit):
    """Words of a message rather than a name, a flag, a path or a setting (DTR_DEVICE=cpu)."""
    return " " in lit.strip()


def single_score(lit, pieces, lead, trail):
    r = align(lit, pieces, lead, trail)
    if r and r[0] >= MIN_MATCH and (2 * r[0] >= len(lit) or r[1] >= 20):
        return r[0]
    return 0


def match_score(key, pieces, lead, trail, generic):
    """How much of a message of the site the test literal(s) `key` spell out; 0 when too little.

    One literal: at least MIN_MATCH characters of the site's text, and at least half the literal unless a
    whole piece of 20 or more characters is in it. A list of parts: one part that passes alone; or every part
    could be in the message (a part may be a value alone) and at least two different texts of the site, of
    MIN_MATCH characters together, are in them, not counting texts `generic` says many messages hold ("op '")."""
    has_value = len(pieces) > 1 or lead or trail
    if len(key) == 1:
        return single_score(key[0], pieces, lead, trail)
    alone = max(single_score(part, pieces, lead, trail) if is_words(part) else 0 for part in key)
    if not any(is_words(part) for part in key):
        return 0  # names, settings or values to try, not the words of a message
    texts = set()
    for part in key:
        r = align(part, pieces, lead, trail)
        if r is None:
            if not (has_value and len(part) <= GAP):
                return alone
            continue
        texts.update(t for t in r[2] if len(t.strip()) >= 2)
    total = sum(len(t) for t in texts if not generic(t))
    if len(texts) >= 2 and total >= MIN_MATCH:
        return max(total, alone)
    return alone


def attach_tests(sites_by_file, by_value):
    site_list = [s for sites in sites_by_file.values() for s in sites]
    index = defaultdict(set)
    for idx, site in enumerate(site_list):
        for seg in site.segs:
            if seg[0] == "lit":
                for k in range(len(seg[1]) - GRAM + 1):
                    index[seg[1][k:k + GRAM]].add(idx)
    site_text = ["\0".join(seg[1] for seg in site.segs if seg[0] == "lit") for site in site_list]
    df = {}

    def generic(text):  # a text more than GENERIC sites' messages hold
        if text not in df:
            df[text] = sum(text in t for t in site_text) > GENERIC
        return df[text]

    found = defaultdict(dict)  # site index -> test -> (score, key)
    for key in sorted(by_value):
        candidates = set()
        for part in key:
            for k in range(len(part) - GRAM + 1):
                candidates |= index.get(part[k:k + GRAM], set())
        for idx in sorted(candidates):
            site = site_list[idx]
            pieces = [seg[1] for seg in site.segs if seg[0] == "lit"]
            score = match_score(key, pieces, site.segs[0][0] != "lit", site.segs[-1][0] != "lit", generic)
            if score:
                for t in by_value[key]:
                    if score > found[idx].get(t, (0, ""))[0]:
                        found[idx][t] = (score, key)
    for idx, site in enumerate(site_list):
        tests = found.get(idx, {})
        # real tests before helper files; the best match first
        site.tests = sorted(tests, key=lambda t: ("." in t.split(" ")[0][-4:], -tests[t][0], t))
        site.evidence = {t: tests[t][1] for t in site.tests}


# ---- output --------------------------------------------------------------------------------------------------

def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(sites_by_file):
    type_order = DTR_TYPES + sorted(OTHER_TYPES) + ["?"]
    counts = defaultdict(lambda: [0, 0])
    for sites in sites_by_file.values():
        for s in sites:
            counts[s.type][0] += s.count
            if s.tests:
                counts[s.type][1] += s.count
    out = []
    w = out.append
    w("# Error sites")
    w("")
    w("<!-- Generated by scripts/error_sites.py: do not edit by hand. -->")
    w("")
    w("Every place dtr's library and programs raise an error, file by file: the exception type, what triggers "
      "it, the")
    w("message as written (" + ELLIPSIS + " where a value goes) and the tests that spell the message out. "
      "[errors.md](errors.md) says what each")
    w("type means and groups these sites into families.")
    w("")
    w("Regenerate it after changing a message or adding a check: `" + REGENERATE + "`.")
    w("`ctest -R docs.error_sites` (`scripts/error_sites.py --check docs/error-sites.md`) fails while this page "
      "is not what")
    w("the script writes.")
    w("")
    w("Reading it: *trigger* is a check's condition (the error comes `unless` it holds) or the `if` or `catch` "
      "that guards a")
    w("throw. *tests* are the `TEST`s under tests/ holding a string literal, or an `expect_error` list of parts, "
      "that a")
    w("message of the site could contain: at least " + str(MIN_MATCH) + " characters of the site's own text, "
      "in order, with values between.")
    w("\u2014 means no test spells the message out (one may still check the type). It is a heuristic: a "
      "generic fragment")
    w("(\"out of memory\") credits every site that holds it, and a test that checks only short fragments "
      "(\"dim 2\") credits none;")
    w("`scripts/error_sites.py --explain REGEX` shows the literal behind each test. A `[[noreturn]]` helper "
      "or a throwing")
    w("lambda that takes its message from its caller (the trace reader's `fail(\"...\")`) is listed at each "
      "call; the CUDA,")
    w("cuBLAS and cuDNN checks are one row per file and macro, with their count (\u00d7N). Sites are in source "
      "order, without")
    w("line numbers.")
    w("")
    w("## Summary")
    w("")
    w("| type | sites | a test names the message | none does |")
    w("|---|--:|--:|--:|")
    total = [0, 0]
    for t in type_order:
        if t in counts:
            n, k = counts[t]
            total[0] += n
            total[1] += k
            w("| `" + t + "` | " + str(n) + " | " + str(k) + " | " + str(n - k) + " |")
    w("| all | " + str(total[0]) + " | " + str(total[1]) + " | " + str(total[0] - total[1]) + " |")
    checks = sum(s.count for sites in sites_by_file.values() for s in sites if s.kind in DEVICE_MACROS)
    w("")
    w("Of the `DeviceError` sites, " + str(checks) + " are CUDA, cuBLAS and cuDNN status checks, which only a "
      "failing device or library")
    w("trips.")
    for path, sites in sites_by_file.items():
        w("")
        w("## " + path)
        w("")
        w("| function | type | trigger | message | tests |")
        w("|---|---|---|---|---|")
        for s in sites:
            func = ", ".join(code_span(f) if not f.startswith("+") else f
                             for f in re.split(r", | (?=\+\d)", s.function)) if s.function else ""
            etype = code_span(s.type)
            if s.count != 1:
                etype += " \u00d7" + str(s.count)
            trigger = s.trigger or ""
            if s.note:
                trigger = (trigger + "; " if trigger else "") + s.note
            message = message_text(s.segs)
            message = code_span(shorten(one_line(message), MESSAGE_CHARS)) if message else ""
            if s.tests:
                shown = [code_span(t) if " " not in t and not t.endswith(".c") else t
                         for t in s.tests[:MAX_TESTS_SHOWN]]
                if len(s.tests) > MAX_TESTS_SHOWN:
                    shown.append("+" + str(len(s.tests) - MAX_TESTS_SHOWN) + " more")
                tests = ", ".join(shown)
            else:
                tests = "\u2014"
            w("| " + " | ".join(cell(x) for x in (func, etype, trigger, message, tests)) + " |")
    w("")
    return "\n".join(out)


def generate(explain=None):
    sites = collect_sites()
    attach_tests(sites, collect_test_literals())
    if explain is not None:  # which test literal made each test a site's
        for path, file_sites in sites.items():
            for site in file_sites:
                text = message_text(site.segs)
                if re.search(explain, path + ": " + text):
                    print(path + ": " + site.type + ": " + text)
                    for t in site.tests:
                        print("    " + t + ": " + repr(site.evidence[t]))
        return None
    return render_markdown(sites)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", metavar="FILE", help="exit 1 if FILE is not what this script writes now")
    parser.add_argument("--explain", metavar="REGEX", help="print the sites whose 'file: message' matches REGEX "
                        "and the test literal behind each of their tests, instead of the page")
    args = parser.parse_args()
    text = generate(args.explain)
    if text is None:
        return 0
    if args.check is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.check, encoding="utf-8") as f:
            current = f.read()
    except OSError as e:
        print(args.check + ": " + e.strerror + "; regenerate with " + REGENERATE, file=sys.stderr)
        return 1
    if current == text:
        return 0
    diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), args.check + " (now)",
                                     args.check + " (as the sources say)", lineterm="", n=1))
    shown = diff[:60]
    print("\n".join(shown), file=sys.stderr)
    if len(diff) > len(shown):
        print("... (" + str(len(diff) - len(shown)) + " more diff lines)", file=sys.stderr)
    print(args.check + " is out of date: regenerate with " + REGENERATE, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
